#pragma once
// torch.utils.data.DistributedSampler semantics: each rank takes every world-th index of one
// permutation (seeded with seed + epoch, so all ranks agree), padded by repeating the head so
// every rank gets the same count.
#include <cstdint>
#include <vector>

namespace yolo {

class DistributedSampler {
 public:
  // Throws std::invalid_argument unless 0 <= rank < world_size.
  DistributedSampler(int64_t dataset_size, int world_size = 1, int rank = 0, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  // Evaluation's split (no shuffle, nothing repeated): rank r of `world_size` takes the
  // contiguous batches [r * nb / world, (r + 1) * nb / world) of the nb batches of `batch_size`
  // one process makes, so that together the ranks see one process's batches, each image once.
  static DistributedSampler contiguous_batches(int64_t dataset_size, int world_size, int rank,
                                               int batch_size);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // This rank's indices for the current epoch (same order as PyTorch's torch.randperm with a
  // generator seeded seed + epoch).
  std::vector<int64_t> indices() const;

  int64_t num_samples() const { return num_samples_; }  // per rank
  int64_t total_size() const { return num_samples_ * world_; }
  // contiguous_batches: the dataset index this rank starts at (0 otherwise).
  int64_t first_index() const { return first_; }

 private:
  int64_t n_;
  int world_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t num_samples_;
  bool contiguous_ = false;
  int64_t first_ = 0;
};

}  // namespace yolo

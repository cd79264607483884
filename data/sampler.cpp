#include "data/sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace yolo {

DistributedSampler::DistributedSampler(int64_t dataset_size, int world_size, int rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : n_(dataset_size),
      world_(world_size),
      rank_(rank),
      shuffle_(shuffle),
      drop_last_(drop_last),
      seed_(seed) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("DistributedSampler: rank " + std::to_string(rank) +
                                " is not in [0, " + std::to_string(world_size) + ")");
  }
  if (dataset_size < 0) throw std::invalid_argument("DistributedSampler: negative dataset size");
  if (drop_last_ && n_ % world_ != 0) {
    num_samples_ = (n_ - world_) / world_ + 1;  // ceil((n - world) / world), as PyTorch
  } else {
    num_samples_ = (n_ + world_ - 1) / world_;
  }
  if (num_samples_ < 0) num_samples_ = 0;
}

DistributedSampler DistributedSampler::contiguous_batches(int64_t dataset_size, int world_size,
                                                          int rank, int batch_size) {
  DistributedSampler s(dataset_size, world_size, rank, false);
  if (batch_size < 1) throw std::invalid_argument("DistributedSampler: batch size must be >= 1");
  const int64_t nb = (dataset_size + batch_size - 1) / batch_size;
  const auto at = [&](int r) { return std::min(dataset_size, nb * r / world_size * batch_size); };
  s.contiguous_ = true;
  s.first_ = at(rank);
  s.num_samples_ = at(rank + 1) - s.first_;
  return s;
}

std::vector<int64_t> DistributedSampler::indices() const {
  if (contiguous_) {
    std::vector<int64_t> mine(static_cast<size_t>(num_samples_));
    std::iota(mine.begin(), mine.end(), first_);
    return mine;
  }
  std::vector<int64_t> all;
  if (shuffle_ && n_ > 0) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch_));
    const at::Tensor perm = at::randperm(n_, gen, at::TensorOptions().dtype(at::kLong));
    const int64_t* p = perm.data_ptr<int64_t>();
    all.assign(p, p + n_);
  } else {
    all.resize(static_cast<size_t>(n_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  const int64_t total = total_size();
  if (!drop_last_) {
    for (size_t i = 0; static_cast<int64_t>(all.size()) < total; ++i) {
      const int64_t head = all[i];  // copy: push_back may reallocate
      all.push_back(head);
    }
  } else {
    all.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += world_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace yolo

#pragma once
// DDP's gradient synchronisation, written on ProcessGroup (c10d's Reducer is not usable with
// Debian's headers). Gradients go into size-capped buckets in reverse parameter order (roughly the
// order backward produces them); a bucket's all-reduce starts from the gradient hooks as soon as
// it is full, so communication overlaps the rest of backward. finish() waits for all of them and
// leaves the average over ranks in every parameter's .grad.
// The first reducing backward launches nothing from the hooks: finish() first sums over the ranks
// which parameters backward reached (DDP's find_unused_parameters, once). Parameters no rank used
// are logged by name and left without a gradient from then on (so momentum and weight decay do
// not move them); those some ranks did not use are logged and go into a last bucket reduced only
// in finish(), so collectives inside backward (SyncBatchNorm's) come in the same order on every
// rank.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "utils/distributed/distributed.h"

namespace yolo {

struct GradSyncStats {
  // Host time finish() blocked on unfinished all-reduces of CPU gradients (Gloo). Not measured
  // for CUDA gradients: there the wait only queues the all-reduce's end on the current stream, so
  // host time says nothing (the Trainer's phase clock times it on the GPU).
  double wait_seconds = 0;
  int64_t syncs = 0;  // finish() calls that reduced
  int64_t bytes = 0;  // gradient bytes reduced per sync
};

class GradSync {
 public:
  // `params`: the trainable parameters, in the model's order; `names` theirs (for the log; may
  // be empty). bucket_cap_bytes 0: an eighth of the gradients, within DDP's 1 MB (its first
  // bucket's cap) and 25 MB (its default), so that a small model's buckets overlap backward too.
  GradSync(std::shared_ptr<ProcessGroup> pg, std::vector<at::Tensor> params,
           int64_t bucket_cap_bytes = 0, int64_t first_bucket_cap_bytes = 1 << 20,
           std::vector<std::string> names = {});
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Whether the next backward reduces (DDP's no_sync when false: gradients only accumulate).
  void set_sync(bool enabled);
  bool sync() const { return sync_; }
  // After a reducing backward: launches what backward left (unused parameters), waits for every
  // bucket and writes the averaged gradients. Throws when a collective fails.
  void finish();

  size_t num_buckets() const { return buckets_.size(); }
  int64_t bucket_cap_bytes() const { return cap_; }
  // After the first reducing finish(): the parameters no rank used, and those some ranks did not.
  const std::vector<size_t>& unused_everywhere() const { return unused_; }
  const std::vector<size_t>& unused_somewhere() const { return partly_used_; }
  const GradSyncStats& stats() const { return stats_; }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    at::Tensor flat;
    int pending = 0;
    bool late = false;  // launched by finish() only
    std::unique_ptr<CommWork> work;
  };
  void build_buckets();
  void find_unused(const std::vector<char>& used);
  void on_grad(size_t param, const at::Tensor& grad);
  at::Tensor slot_of(size_t param) const;
  void launch_ready(bool with_late);
  void reset_buckets();  // nothing seen, nothing launched: ready for the next backward

  std::shared_ptr<ProcessGroup> pg_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  int64_t cap_ = 0, first_cap_ = 0;
  std::vector<size_t> unused_, partly_used_;
  std::vector<char> excluded_;  // unused everywhere: in no bucket, no gradient
  bool probed_ = false;
  std::vector<unsigned> hooks_;
  std::vector<size_t> bucket_of_, offset_of_;
  std::vector<char> seen_;
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;  // buckets launch in order: every rank must issue the same sequence
  bool sync_ = true;
  GradSyncStats stats_;
};

}  // namespace yolo

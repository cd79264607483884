#pragma once
// The trainer's side of DDP: YOLOv5's checks on the options, the device of this rank, the process
// group, and rank-0-first synchronisation for the work only rank 0 does (downloading data,
// building label caches, validating, saving).
#include <functional>
#include <memory>
#include <string>

#include "utils/core/runtime/device.h"
#include "utils/distributed/distributed.h"

namespace yolo {

class DistContext {
 public:
  DistContext() = default;  // a single process
  DistContext(DistEnv env, std::shared_ptr<ProcessGroup> pg);

  bool active() const { return pg_ != nullptr; }
  int rank() const { return active() ? pg_->rank() : -1; }
  int world_size() const { return active() ? pg_->size() : 1; }
  bool is_rank0() const { return !active() || pg_->rank() == 0; }
  const DistEnv& env() const { return env_; }
  const std::shared_ptr<ProcessGroup>& group() const { return pg_; }

  // Rank 0 publishes `value` under `key`; the other ranks wait for it (as long as rank 0's solo
  // work may take, not the collective timeout) and return it. A single process returns `value`.
  std::string from_rank0(const std::string& key, const std::string& value) const;
  // A barrier for the data layer: rank 0 calls it when done, the others wait for that.
  std::function<void()> rank0_first(const std::string& name) const;
  // Rank 0 records the run dir in torchrun's store, which outlives a restart of the workers.
  void remember_run_dir(const std::string& dir) const;
  // After a torchrun restart (TORCHELASTIC_RESTART_COUNT > 0): the run's last.pt, the same on
  // every rank; "" when this is no restart or the run saved nothing yet.
  std::string restart_checkpoint() const;

 private:
  DistEnv env_;
  std::shared_ptr<ProcessGroup> pg_;
};

// How long ranks wait for rank 0's solo work (YOLOv5 v7.0 gives its process group 3 hours).
constexpr int kRank0WorkTimeoutSeconds = 3 * 3600;

// What the process group needs of train's options.
struct DistOptions {
  std::string device;       // --device
  int local_rank = -1;      // --local_rank
  int batch_size = 16;      // total over the ranks (the log line shows each rank's share)
  std::string backend;      // --dist-backend: "", "nccl" or "gloo"
  int timeout_seconds = 0;  // --dist-timeout; 0: 60 for Gloo, 600 for NCCL
};

// Reads the launcher's environment. Single process: selects opt.device. DDP (the options' rules
// across ranks are train's validate's): device rank_device() (the LOCAL_RANK-th GPU of --device, or
// cuda:LOCAL_RANK) or CPU (threads from OMP_NUM_THREADS), then the process group on that device
// (NCCL on CUDA when compiled in, Gloo otherwise, or --dist-backend) with --dist-timeout. Throws
// UsageError on bad flags.
DistContext start_distributed(const DistOptions& opt, DeviceSelection& dev);

}  // namespace yolo

#pragma once
// The trainer's side of DDP: YOLOv5's checks on the options, the device of this rank, the process
// group, and rank-0-first synchronisation for the work only rank 0 does (downloading data,
// building label caches, validating, saving).
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "utils/core/rank_exchange.h"
#include "utils/core/runtime/device.h"
#include "utils/distributed/distributed.h"

namespace yolo {

// RankExchange through a group's rendezvous store: each exchange has keys of its own (a sequence
// number, the same on every rank since every rank makes the same exchanges in the same order),
// deleted once read, so large messages (a dataset's labels) do not pile up in the store. Waits as
// long as rank 0's solo work may take; a lost rank ends the wait through the heartbeat watchdog.
class StoreExchange : public RankExchange {
 public:
  StoreExchange(std::shared_ptr<ProcessGroup> pg, int local_rank, int local_size)
      : pg_(std::move(pg)), local_rank_(local_rank), local_size_(local_size) {}
  int rank() const override { return pg_->rank(); }
  int size() const override { return pg_->size(); }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::vector<std::string> gather_to_rank0(const std::string& what,
                                           const std::string& mine) const override;
  std::string broadcast_from_rank0(const std::string& what,
                                   const std::string& value) const override;

 private:
  std::string next_key() const;
  std::shared_ptr<ProcessGroup> pg_;
  int local_rank_, local_size_;
  mutable int64_t calls_ = 0;
};

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
  // The ranks for the data and evaluation layers; null in a single process.
  const RankExchange* exchange() const { return exchange_.get(); }

  // Rank 0 publishes `value` under `key`; the other ranks wait for it (as long as rank 0's solo
  // work may take, not the collective timeout) and return it. A single process returns `value`.
  std::string from_rank0(const std::string& key, const std::string& value) const;
  // A barrier for the data layer: rank 0 calls it when done, the others wait for that.
  std::function<void()> rank0_first(const std::string& name) const;
  // Every rank arrives before any leaves; waits as long as rank 0's solo work may take (a slow
  // cache fill on one rank must not trip the first collective's --dist-timeout). A lost rank ends
  // the wait through the heartbeat watchdog.
  void store_barrier(const std::string& name) const;
  // DDP's verify_params_across_processes, before the first broadcast: `state` (a model's
  // parameters and buffers by name, in order) has the same names, shapes and types on every rank,
  // else every rank throws UsageError naming the first difference and both ranks' shapes.
  void check_same_model(const std::vector<std::pair<std::string, at::Tensor>>& state) const;
  // Rank 0 records the run dir in torchrun's store, which outlives a restart of the workers.
  void remember_run_dir(const std::string& dir) const;
  // After a torchrun restart (TORCHELASTIC_RESTART_COUNT > 0): the run's last.pt, the same on
  // every rank; "" when this is no restart or the run saved nothing yet.
  std::string restart_checkpoint() const;

 private:
  DistEnv env_;
  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<StoreExchange> exchange_;
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

// val under torchrun (or the built-in launcher's environment): a Gloo group whose store carries
// the exchanges between the ranks and whose heartbeat ends a rank whose peer is lost within
// `timeout_seconds`; only rank 0 logs. Outside torchrun: a single process ({}).
DistContext start_distributed_eval(int timeout_seconds = 60);

}  // namespace yolo

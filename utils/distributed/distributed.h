#pragma once
// Multi-process training: the launcher's environment (torchrun or our own), and a process group
// (c10d's Gloo on CPU, NCCL on CUDA) behind a small interface, so that only distributed.cpp sees
// c10d's headers and their differences between LibTorch 1.13 and 2.x.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace yolo {

// What torchrun (or `train --nproc-per-node`) puts in the environment.
struct DistEnv {
  int local_rank = -1;  // -1: a single process (YOLOv5's convention)
  int rank = -1;        // global rank; -1 when single
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT
  std::string error_file;    // TORCHELASTIC_ERROR_FILE
  bool distributed() const { return local_rank != -1; }
  bool is_rank0() const { return rank <= 0; }
};

// Reads LOCAL_RANK, RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and torchrun's
// variables. `cli_local_rank` is the legacy --local_rank flag (used when LOCAL_RANK is unset).
// Throws UsageError naming the variable when one is malformed or inconsistent.
DistEnv read_dist_env(int cli_local_rank = -1);

// A collective that may still be running.
class CommWork {
 public:
  virtual ~CommWork() = default;
  virtual void wait() = 0;  // throws when the collective failed (e.g. a peer died or timed out)
};

// Collectives over all ranks. Every rank must issue the same collectives in the same order.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "gloo" or "nccl"
  // Sums `t` over the ranks in place (the result lands on every rank).
  virtual std::unique_ptr<CommWork> allreduce_sum_async(at::Tensor t) = 0;
  void allreduce_sum(at::Tensor t) { allreduce_sum_async(std::move(t))->wait(); }
  // Copies `root`'s `t` into every rank's `t`.
  virtual void broadcast(at::Tensor t, int root = 0) = 0;
  virtual void barrier() = 0;
  // The rendezvous store, for small messages that may take long to come (rank 0 validating while
  // the others wait): `get` blocks until the key exists or `timeout` passes (then throws).
  virtual void store_set(const std::string& key, const std::string& value) = 0;
  virtual std::string store_get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Adds `n` to the counter under `key` (0 when new) and returns the sum, atomically.
  virtual int64_t store_add(const std::string& key, int64_t n) = 0;
  virtual void store_delete(const std::string& key) = 0;
  // Keys that outlive a restart of the workers by torchrun (kept in its agent's store, outside
  // the per-attempt prefix); without an agent store they live as long as this group.
  virtual void job_store_set(const std::string& key, const std::string& value) = 0;
  virtual std::string job_store_get_or(const std::string& key, const std::string& fallback) = 0;
  // Ends the group's work cleanly (NCCL's watchdog and communicators) before it is destroyed, as
  // destroy_process_group(); later collectives fail. Called by the destructor too; never throws.
  virtual void shutdown() = 0;
  // Ends the group without waiting for work in flight (NCCL's abort), for the error path.
  virtual void abort() = 0;
};

// Connects to the store and creates the group. `backend` is "gloo" or "nccl" (NCCL needs a build
// with it and a CUDA device per rank). `device` is this rank's: for NCCL it becomes the current
// CUDA device first and the group is bound to it (communicators are made for it alone). Throws
// UsageError when NCCL is asked of a build without it or of a CPU device, otherwise an error with
// the address and what to check when the group cannot be made.
std::shared_ptr<ProcessGroup> init_process_group(const DistEnv& env, const std::string& backend,
                                                 std::chrono::milliseconds timeout,
                                                 const c10::Device& device = c10::Device("cpu"));

// Broadcasts the tensors from `root`, flattened by dtype so a model's parameters or buffers take
// one message each (DDP's initial sync and its broadcast_buffers).
void broadcast_coalesced(ProcessGroup& pg, const std::vector<at::Tensor>& tensors, int root = 0);

// Writes torchrun's error file (TORCHELASTIC_ERROR_FILE, the JSON of torch.distributed.elastic's
// ErrorHandler) so torchrun reports this message as the cause. Never throws.
void write_elastic_error_file(const std::string& path, const std::string& type,
                              const std::string& message);

}  // namespace yolo

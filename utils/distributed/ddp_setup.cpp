#include "utils/distributed/ddp_setup.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/runtime/cuda_env.h"

namespace yolo {

DistContext::DistContext(DistEnv env, std::shared_ptr<ProcessGroup> pg)
    : env_(std::move(env)), pg_(std::move(pg)) {}

std::string DistContext::from_rank0(const std::string& key, const std::string& value) const {
  if (!active()) return value;
  if (pg_->rank() == 0) {
    pg_->store_set(key, value);
    return value;
  }
  try {
    return pg_->store_get(key, std::chrono::seconds(kRank0WorkTimeoutSeconds));
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(pg_->rank()) + " waited for rank 0 ('" + key +
                             "') and gave up: " + e.what() +
                             " (rank 0 died or was stopped; see its error)");
  }
}

std::function<void()> DistContext::rank0_first(const std::string& name) const {
  auto calls = std::make_shared<int>(0);
  return [this, name, calls] { from_rank0(name + "/" + std::to_string((*calls)++), "done"); };
}

namespace {
constexpr const char* kRunDirKey = "run_dir";
}  // namespace

void DistContext::remember_run_dir(const std::string& dir) const {
  if (active() && is_rank0()) pg_->job_store_set(kRunDirKey, dir);
}

std::string DistContext::restart_checkpoint() const {
  if (!active() || env_.restart_count == 0) return "";
  std::string ckpt;
  if (is_rank0()) {
    const std::string dir = pg_->job_store_get_or(kRunDirKey, "");
    const std::filesystem::path f = std::filesystem::path(dir) / "weights" / "last.pt";
    std::error_code ec;
    if (!dir.empty() && std::filesystem::is_regular_file(f, ec)) ckpt = f.string();
  }
  return from_rank0("elastic_resume", ckpt);
}

DistContext start_distributed(const DistOptions& opt, DeviceSelection& dev) {
  const DistEnv env = read_dist_env(opt.local_rank);
  if (!env.distributed()) {
    dev = select_device(opt.device, opt.batch_size);
    set_current_cuda_device(dev.device);  // --device 1: kernels and allocations go to cuda:1
    return {};
  }
  dev = select_device(opt.device);
  const std::string backend = !opt.backend.empty()
                                  ? opt.backend
                                  : (dev.device.is_cuda() && nccl_compiled() ? "nccl" : "gloo");
  int shared_gpus = 0;  // > 0: fewer GPUs than local ranks, shared over Gloo
  if (dev.device.is_cuda()) {
    const int gpus = static_cast<int>(torch::cuda::device_count());
    const int pool = dev.listed ? static_cast<int>(dev.cuda_ids.size()) : gpus;
    if (pool < env.local_world_size) shared_gpus = pool;
    dev = rank_device(dev, env.local_rank, env.local_world_size, gpus, backend == "gloo");
  } else if (const char* t = std::getenv("OMP_NUM_THREADS"); t && std::atoi(t) > 0) {
    torch::set_num_threads(std::atoi(t));  // torchrun's default is 1 thread per rank
  }
  // Gloo: 60 s (as YOLOv5); NCCL: PyTorch's default of 10 minutes.
  const int timeout_s =
      opt.timeout_seconds > 0 ? opt.timeout_seconds : (backend == "gloo" ? 60 : 600);
  // Only rank 0 (global RANK, also in multi-node) logs; the others print errors only.
  set_log_enabled(env.rank == 0);
  set_log_tag("[rank" + std::to_string(env.rank) + "] ");
  if (shared_gpus > 0) {
    log_warn("DDP: " + std::to_string(env.local_world_size) + " ranks share " +
             std::to_string(shared_gpus) +
             " GPU(s) over Gloo; one GPU per rank with NCCL is faster");
  }
  auto pg = init_process_group(env, backend, std::chrono::seconds(timeout_s), dev.device);
  log_info("DDP: rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
           " (" + backend + ", timeout " + std::to_string(timeout_s) + " s, " +
           std::to_string(opt.batch_size / env.world_size) + " images per rank)");
  return DistContext(env, std::move(pg));
}

}  // namespace yolo

#include "utils/distributed/ddp_setup.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/runtime/cuda_env.h"

namespace yolo {

std::string StoreExchange::next_key() const { return "exchange/" + std::to_string(calls_++); }

std::vector<std::string> StoreExchange::gather_to_rank0(const std::string& what,
                                                        const std::string& mine) const {
  const std::string key = next_key();
  const int me = pg_->rank();
  if (me != 0) {
    pg_->store_set(key + "/" + std::to_string(me), mine);
    return {};
  }
  std::vector<std::string> all{mine};
  for (int r = 1; r < pg_->size(); ++r) {
    const std::string k = key + "/" + std::to_string(r);
    try {
      all.push_back(pg_->store_get(k, std::chrono::seconds(kRank0WorkTimeoutSeconds)));
    } catch (const std::exception& e) {
      throw std::runtime_error("rank 0 waited for rank " + std::to_string(r) + " (" + what +
                               ") and gave up: " + e.what());
    }
    pg_->store_delete(k);
  }
  return all;
}

std::string StoreExchange::broadcast_from_rank0(const std::string& what,
                                                const std::string& value) const {
  const std::string key = next_key();
  if (pg_->rank() == 0) {
    if (pg_->size() > 1) pg_->store_set(key, value);
    return value;
  }
  std::string got;
  try {
    got = pg_->store_get(key, std::chrono::seconds(kRank0WorkTimeoutSeconds));
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(pg_->rank()) + " waited for rank 0 (" + what +
                             ") and gave up: " + e.what());
  }
  // The last reader deletes it.
  if (pg_->store_add(key + "/read", 1) == pg_->size() - 1) {
    pg_->store_delete(key);
    pg_->store_delete(key + "/read");
  }
  return got;
}

DistContext::DistContext(DistEnv env, std::shared_ptr<ProcessGroup> pg)
    : env_(std::move(env)),
      pg_(std::move(pg)),
      exchange_(pg_ ? std::make_shared<StoreExchange>(pg_, std::max(env_.local_rank, 0),
                                                      std::max(env_.local_world_size, 1))
                    : nullptr) {}

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

void DistContext::store_barrier(const std::string& name) const {
  if (!active()) return;
  exchange_->gather_to_rank0("every rank at " + name, "");
  exchange_->broadcast_from_rank0("every rank past " + name, "");
}

namespace {
constexpr const char* kRunDirKey = "run_dir";

// One line per tensor: "name dtype d0,d1,...".
std::vector<std::string> describe_state(
    const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::vector<std::string> lines;
  for (const auto& [name, t] : state) {
    std::string dims;
    for (int64_t d : t.sizes()) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    lines.push_back(name + " " + std::string(c10::toString(t.scalar_type())) + " [" + dims + "]");
  }
  return lines;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    const size_t end = s.find('\n', start);
    out.push_back(s.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// "" when `theirs` (rank r's) equals `ours` (rank 0's), else the first difference.
std::string model_difference(const std::vector<std::string>& ours,
                             const std::vector<std::string>& theirs, int r) {
  const std::string rk = "rank " + std::to_string(r);
  for (size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i) {
    if (ours[i] != theirs[i]) {
      return "tensor " + std::to_string(i) + " is " + ours[i] + " on rank 0 and " + theirs[i] +
             " on " + rk;
    }
  }
  if (ours.size() == theirs.size()) return "";
  return "rank 0's model has " + std::to_string(ours.size()) + " parameters and buffers, " + rk +
         "'s " + std::to_string(theirs.size()) + " (first extra: " +
         (ours.size() > theirs.size() ? ours[theirs.size()] + " on rank 0"
                                      : theirs[ours.size()] + " on " + rk) +
         ")";
}
}  // namespace

void DistContext::check_same_model(
    const std::vector<std::pair<std::string, at::Tensor>>& state) const {
  if (!active()) return;
  const std::vector<std::string> mine = describe_state(state);
  std::string text;
  for (const auto& l : mine) text += l + "\n";
  const std::vector<std::string> all = exchange_->gather_to_rank0("its model's tensors", text);
  std::string verdict;
  for (size_t r = 1; r < all.size() && verdict.empty(); ++r) {
    verdict = model_difference(mine, split_lines(all[r]), static_cast<int>(r));
  }
  verdict = exchange_->broadcast_from_rank0("whether the ranks hold the same model", verdict);
  if (!verdict.empty()) {
    throw UsageError("the ranks build different models: " + verdict +
                     "; start every rank with the same --cfg, --weights, --data and --single-cls");
  }
}

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

DistContext start_distributed_eval(int timeout_seconds) {
  const DistEnv env = read_dist_env();
  if (!env.distributed()) return {};
  set_log_enabled(env.rank == 0);
  set_log_tag("[rank" + std::to_string(env.rank) + "] ");
  auto pg = init_process_group(env, "gloo", std::chrono::seconds(timeout_seconds));
  log_info("ranks: " + std::to_string(env.world_size) +
           " processes share the validation (each its share of the batches)");
  return DistContext(env, std::move(pg));
}

}  // namespace yolo

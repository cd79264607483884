#include "utils/distributed/data_parallel.h"

#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>

#include <exception>
#include <stdexcept>
#include <thread>

#include "utils/core/runtime/grad_scaler.h"

namespace yolo {

DataParallel::DataParallel(DetectionModel master, std::vector<torch::Device> devices)
    : master_(std::move(master)), devices_(std::move(devices)) {
  if (devices_.size() < 2) throw std::invalid_argument("DataParallel needs 2 or more devices");
  master_state_ = {master_->parameters(), master_->buffers()};
  for (size_t i = 1; i < devices_.size(); ++i) {
    DetectionModel r(master_->spec());
    r->to(devices_[i]);
    State state{r->parameters(), r->buffers()};
    // The master's layout (channels-last on a GPU): the per-step copies of weights and gradients
    // between them then move bytes without reordering them.
    auto like_master = [&](std::vector<torch::Tensor>& mine, const std::vector<torch::Tensor>& m) {
      for (size_t k = 0; k < mine.size(); ++k) {
        mine[k].set_data(torch::empty_like(m[k], mine[k].options(), at::MemoryFormat::Preserve));
      }
    };
    like_master(state.params, master_state_.params);
    like_master(state.buffers, master_state_.buffers);
    replicas_.push_back(r);
    replica_state_.push_back(std::move(state));
  }
}

void DataParallel::sync_replicas() {
  torch::NoGradGuard no_grad;
  const auto& mp = master_state_.params;
  const auto& mb = master_state_.buffers;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    replicas_[i]->train(master_->is_training());
    auto& rp = replica_state_[i].params;
    auto& rb = replica_state_[i].buffers;
    for (size_t k = 0; k < mp.size(); ++k) {
      rp[k].copy_(mp[k], /*non_blocking=*/true);
      rp[k].set_requires_grad(mp[k].requires_grad());
    }
    for (size_t k = 0; k < mb.size(); ++k) rb[k].copy_(mb[k], true);
  }
}

std::vector<torch::Tensor> DataParallel::forward(const torch::Tensor& images) {
  sync_replicas();
  const std::vector<torch::Tensor> chunks = images.chunk(static_cast<int64_t>(devices_.size()), 0);
  std::vector<std::vector<torch::Tensor>> outs(chunks.size());
  std::vector<std::exception_ptr> errors(chunks.size());
  std::vector<std::thread> threads;
  // Grad mode and autocast are thread-local: the workers run under the caller's, each on its
  // own device (as the current CUDA device, which kernels and the caching allocator use).
  const bool grad = torch::GradMode::is_enabled();
  const AutocastState autocast = AutocastState::current();
  for (size_t i = 1; i < chunks.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        torch::AutoGradMode mode(grad);
        autocast.apply();
        c10::OptionalDeviceGuard device(devices_[i]);
        outs[i] = replicas_[i - 1]->forward_raw(chunks[i].to(devices_[i], true));
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  try {
    outs[0] = master_->forward_raw(chunks[0].to(devices_[0], true));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  std::vector<torch::Tensor> gathered;
  for (size_t l = 0; l < outs[0].size(); ++l) {
    std::vector<torch::Tensor> parts;
    for (const auto& o : outs) parts.push_back(o[l].to(devices_[0]));
    gathered.push_back(torch::cat(parts, 0));
  }
  return gathered;
}

void DataParallel::reduce_grads() {
  torch::NoGradGuard no_grad;
  auto& mp = master_state_.params;
  for (auto& state : replica_state_) {
    auto& rp = state.params;
    for (size_t k = 0; k < mp.size(); ++k) {
      if (!rp[k].grad().defined()) continue;
      const torch::Tensor g = rp[k].grad().to(devices_[0]);
      if (mp[k].grad().defined()) {
        mp[k].mutable_grad().add_(g);
      } else {
        mp[k].mutable_grad() = g.clone();
      }
      rp[k].mutable_grad().reset();
    }
  }
}

}  // namespace yolo

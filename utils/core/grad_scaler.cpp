#include "utils/core/grad_scaler.h"

#include <torch/torch.h>

#include "utils/core/torch_compat.h"

namespace yolo {

AutocastState AutocastState::current() {
  AutocastState s;
  s.cuda = compat::autocast_enabled(c10::kCUDA);
  s.cpu = compat::autocast_enabled(c10::kCPU);
  s.cuda_dtype = compat::autocast_dtype(c10::kCUDA);
  s.cpu_dtype = compat::autocast_dtype(c10::kCPU);
  return s;
}

void AutocastState::apply() const {
  compat::set_autocast_enabled(c10::kCUDA, cuda);
  compat::set_autocast_enabled(c10::kCPU, cpu);
  compat::set_autocast_dtype(c10::kCUDA, cuda_dtype);
  compat::set_autocast_dtype(c10::kCPU, cpu_dtype);
}

AutocastScope::AutocastScope(bool enabled, c10::DeviceType device)
    : enabled_(enabled), previous_(AutocastState::current()) {
  if (!enabled_) return;
  TORCH_CHECK(device == c10::kCUDA || device == c10::kCPU, "autocast on ", device,
              " is not supported (CUDA or CPU)");
  compat::set_autocast_dtype(device, device == c10::kCUDA ? at::kHalf : at::kBFloat16);
  compat::set_autocast_enabled(device, true);
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  previous_.apply();
  // The low-precision weight copies of this step, once no enclosing scope uses them.
  if (!previous_.cuda && !previous_.cpu) at::autocast::clear_cache();
}

GradScaler::GradScaler(bool enabled, double init_scale, double growth_factor, double backoff_factor,
                       int growth_interval)
    : enabled_(enabled),
      scale_(init_scale),
      growth_(growth_factor),
      backoff_(backoff_factor),
      interval_(growth_interval) {}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

void GradScaler::unscale(const std::vector<at::Tensor>& params) {
  found_inf_ = false;
  if (!enabled_) return;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> bad;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    at::Tensor g = p.grad();
    g.mul_(1.0 / scale_);
    bad.push_back(torch::logical_not(torch::isfinite(g)).any());
  }
  // One device-to-host read for all parameters.
  if (!bad.empty()) found_inf_ = torch::stack(bad).any().item<bool>();
}

void GradScaler::update() {
  if (!enabled_) return;
  if (found_inf_) {
    scale_ *= backoff_;
    tracker_ = 0;
  } else if (++tracker_ >= interval_) {
    scale_ *= growth_;
    tracker_ = 0;
  }
}

}  // namespace yolo

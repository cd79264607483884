#include "utils/grad_scaler.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace yolo {

AutocastScope::AutocastScope(bool enabled)
    : enabled_(enabled), previous_(at::autocast::is_enabled()) {
  if (enabled_) at::autocast::set_enabled(true);
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  at::autocast::set_enabled(previous_);
  if (!previous_) at::autocast::clear_cache();  // the fp16 weight copies of this step
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

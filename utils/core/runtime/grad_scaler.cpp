#include "utils/core/runtime/grad_scaler.h"

#include <torch/torch.h>

#include "utils/core/runtime/torch_compat.h"

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
      init_scale_(init_scale),
      growth_(growth_factor),
      backoff_(backoff_factor),
      interval_(growth_interval) {}

void GradScaler::lazy_init(const c10::Device& device) {
  if (scale_.defined() && scale_.device() == device) return;
  const auto f = torch::TensorOptions(torch::kFloat32).device(device);
  scale_ = scale_.defined() ? scale_.to(device) : torch::full({}, init_scale_, f);
  growth_tracker_ = growth_tracker_.defined() ? growth_tracker_.to(device)
                                              : torch::zeros({}, f.dtype(torch::kInt32));
  found_inf_ = torch::zeros({}, f);
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!enabled_) return loss;
  lazy_init(loss.device());
  return loss * scale_;
}

void GradScaler::unscale(const std::vector<at::Tensor>& params) {
  if (!enabled_) return;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  lazy_init(grads.front().device());
  found_inf_.zero_();
  // As torch.cuda.amp: the reciprocal in double, then float.
  const at::Tensor inv_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat32);
  compat::unscale_and_check(grads, found_inf_, inv_scale);
}

void GradScaler::update() {
  if (!enabled_ || !found_inf_.defined()) return;
  compat::update_scale(scale_, growth_tracker_, found_inf_, growth_, backoff_, interval_);
}

bool GradScaler::should_step() const {
  return !enabled_ || !found_inf_.defined() || found_inf_.item<float>() == 0.0f;
}

double GradScaler::current_scale() const {
  return scale_.defined() ? scale_.item<double>() : init_scale_;
}

}  // namespace yolo

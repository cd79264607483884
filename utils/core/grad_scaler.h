#pragma once
// Mixed precision (YOLOv5's amp=True on CUDA): a scope that turns autocast on, and
// torch.cuda.amp.GradScaler's dynamic loss scaling (LibTorch has no C++ GradScaler).
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <vector>

namespace yolo {

// The calling thread's autocast settings (they are thread-local): what a worker thread copies to
// run under its caller's autocast.
struct AutocastState {
  bool cuda = false, cpu = false;
  at::ScalarType cuda_dtype = at::kHalf, cpu_dtype = at::kBFloat16;
  static AutocastState current();
  void apply() const;
};

// Autocast for the forward pass and the loss, as `with torch.autocast(device_type)`: float16 on
// CUDA (torch.cuda.amp.autocast), bfloat16 on CPU. Restores the previous state when it ends, and
// drops the cached low-precision weight copies when it ends the outermost scope.
class AutocastScope {
 public:
  explicit AutocastScope(bool enabled, c10::DeviceType device = c10::kCUDA);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  AutocastState previous_;
};

// GradScaler with PyTorch's defaults: scale 2^16, x2 after 2000 steps without inf/NaN gradients,
// x0.5 and the step skipped when there are some. Disabled, every call passes through.
class GradScaler {
 public:
  explicit GradScaler(bool enabled, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int growth_interval = 2000);
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the gradients by the scale (before clipping) and records whether any is not finite.
  void unscale(const std::vector<at::Tensor>& params);
  // True when the optimizer should step (no inf/NaN was found).
  bool should_step() const { return !found_inf_; }
  // Adjusts the scale after the step, as GradScaler.update().
  void update();
  double current_scale() const { return scale_; }
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  double scale_, growth_, backoff_;
  int interval_, tracker_ = 0;
  bool found_inf_ = false;
};

}  // namespace yolo

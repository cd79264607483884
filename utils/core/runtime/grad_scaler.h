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
// x0.5 and the step skipped when there are some. The scale, the growth count and the inf/NaN flag
// live on the gradients' device, so the training step never waits for a device value: the
// optimizer reads found_inf() and skips on the device. Disabled, every call passes through.
class GradScaler {
 public:
  explicit GradScaler(bool enabled, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int growth_interval = 2000);
  at::Tensor scale(const at::Tensor& loss);
  // Divides the gradients by the scale (before clipping) and records on the device whether any
  // is not finite: one multi-tensor kernel, no host read.
  void unscale(const std::vector<at::Tensor>& params);
  // 1 when the last unscale found an inf/NaN gradient, else 0 (float, on the device); undefined
  // while disabled or before the first unscale.
  const at::Tensor& found_inf() const { return found_inf_; }
  // Adjusts the scale after the step, as GradScaler.update(), on the device.
  void update();
  // Host reads, for tests and logs (they synchronise).
  bool should_step() const;
  double current_scale() const;
  bool enabled() const { return enabled_; }

 private:
  void lazy_init(const c10::Device& device);
  bool enabled_;
  double init_scale_, growth_, backoff_;
  int interval_;
  at::Tensor scale_, growth_tracker_, found_inf_;  // float, int32, float; on the device
};

}  // namespace yolo

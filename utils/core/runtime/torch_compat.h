#pragma once
// The differences between the LibTorch versions the project builds against (Debian's 1.13 and
// PyTorch's 2.x wheels) that the rest of the code would otherwise meet. c10d's class layout is
// the other one; it stays inside utils/distributed.cpp, the only file that includes c10d.
#include <ATen/Functions.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 4
#error "LibTorch 2.0-2.3 is not supported: use 1.13 (Debian) or 2.4 and later"
#endif

namespace yolo::compat {

// Autocast state per device type (thread-local in every version). 1.13 has one function per
// device; 2.4 and later take the device type.
#if TORCH_VERSION_MAJOR >= 2
inline bool autocast_enabled(c10::DeviceType d) { return at::autocast::is_autocast_enabled(d); }
inline void set_autocast_enabled(c10::DeviceType d, bool on) {
  at::autocast::set_autocast_enabled(d, on);
}
inline at::ScalarType autocast_dtype(c10::DeviceType d) {
  return at::autocast::get_autocast_dtype(d);
}
inline void set_autocast_dtype(c10::DeviceType d, at::ScalarType t) {
  at::autocast::set_autocast_dtype(d, t);
}
#else
inline bool autocast_enabled(c10::DeviceType d) {
  return d == c10::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
inline void set_autocast_enabled(c10::DeviceType d, bool on) {
  d == c10::kCPU ? at::autocast::set_cpu_enabled(on) : at::autocast::set_enabled(on);
}
inline at::ScalarType autocast_dtype(c10::DeviceType d) {
  return d == c10::kCPU ? at::autocast::get_autocast_cpu_dtype()
                        : at::autocast::get_autocast_gpu_dtype();
}
inline void set_autocast_dtype(c10::DeviceType d, at::ScalarType t) {
  d == c10::kCPU ? at::autocast::set_autocast_cpu_dtype(t)
                 : at::autocast::set_autocast_gpu_dtype(t);
}
#endif

// The key of a parameter in torch::optim::Optimizer::state(): 1.13 keys by the TensorImpl's
// address printed as a string, 2.x by the address itself. `Key` is the map's key_type.
template <typename Key>
Key optimizer_state_key(const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << p.unsafeGetTensorImpl();
    return s.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

// Multi-tensor kernels (one launch for many tensors on a GPU). 2.4 and later have them for CPU and
// CUDA; 1.13, which the project only builds for the CPU, gets per-tensor loops of the same math.
#if TORCH_VERSION_MAJOR >= 2
#define YOLO_HAS_FUSED_OPTIMIZERS 1
#endif

// grads *= inv_scale; found_inf = 1 if any element of any gradient is inf or NaN (else kept).
inline void unscale_and_check(std::vector<at::Tensor>& grads, at::Tensor& found_inf,
                              const at::Tensor& inv_scale) {
#if TORCH_VERSION_MAJOR >= 2
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
#else
  for (auto& g : grads) {
    g.mul_(inv_scale);
    found_inf.copy_(at::maximum(found_inf, at::logical_not(at::isfinite(g)).any().to(found_inf)));
  }
#endif
}

// torch.cuda.amp's scale update: x backoff on inf/NaN (growth count reset), x growth after
// `interval` clean steps.
inline void update_scale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                         double growth, double backoff, int64_t interval) {
#if TORCH_VERSION_MAJOR >= 2
  at::_amp_update_scale_(scale, growth_tracker, found_inf, growth, backoff, interval);
#else
  const at::Tensor bad = found_inf > 0;
  const at::Tensor tracked = at::where(bad, at::zeros_like(growth_tracker), growth_tracker + 1);
  const at::Tensor grow = tracked >= interval;
  scale.copy_(at::where(bad, scale * backoff, at::where(grow, scale * growth, scale)));
  growth_tracker.copy_(at::where(grow, at::zeros_like(tracked), tracked));
#endif
}

// tensors[i] *= factor (a 0-dim tensor on their device).
inline void foreach_mul_(std::vector<at::Tensor>& tensors, const at::Tensor& factor) {
#if TORCH_VERSION_MAJOR >= 2
  at::_foreach_mul_(tensors, factor);
#else
  for (auto& t : tensors) t.mul_(factor);
#endif
}

// dst[i].copy_(src[i]) (same shapes; dst may be strided differently, e.g. channels-last grads).
inline void foreach_copy_(std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src) {
#if TORCH_VERSION_MAJOR >= 2
  at::_foreach_copy_(dst, src);
#else
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
#endif
}

// The 2-norm of each tensor.
inline std::vector<at::Tensor> foreach_norm(const std::vector<at::Tensor>& tensors) {
#if TORCH_VERSION_MAJOR >= 2
  return at::_foreach_norm(tensors, 2);
#else
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.norm(2));
  return out;
#endif
}

}  // namespace yolo::compat

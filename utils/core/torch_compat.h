#pragma once
// The differences between the LibTorch versions the project builds against (Debian's 1.13 and
// PyTorch's 2.x wheels) that the rest of the code would otherwise meet. c10d's class layout is
// the other one; it stays inside utils/distributed.cpp, the only file that includes c10d.
#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>

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

}  // namespace yolo::compat

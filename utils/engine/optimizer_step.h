#pragma once
// The optimizer half of a training step without per-parameter kernels or host reads: gradient
// clipping with multi-tensor norms and a device-side coefficient, and SGD/Adam/AdamW/MuSGD updates
// of every parameter group as multi-tensor (foreach) or fused kernels (MuSGD's Newton-Schulz
// iterations as batched matrix products). The state lives in the
// torch::optim optimizer (its param groups' options and per-parameter states), so checkpoints,
// resume and the warmup's lr/momentum changes see the same objects as before.
//
// On the CPU the foreach updates are bit for bit LibTorch's SGD/Adam/AdamW steps. On a GPU the
// fused kernels, and MuSGD, also take AMP's found_inf, so a step with inf/NaN gradients is
// skipped on the device instead of by a host read.
#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <optional>
#include <string>
#include <vector>

namespace yolo {

// clip_grad_norm_(params, max_norm) with foreach norms: the coefficient min(1, max / (norm +
// 1e-6)) stays on the device. Returns the total norm as a 0-dim device tensor (not read).
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

class OptimizerStep {
 public:
  enum class Kernel { kForeach, kFused };
  // name: SGD, Adam, AdamW or MuSGD, as make_optimizer. kFused needs LibTorch 2.4 or later
  // (MuSGD has no fused kernel: it runs foreach kernels on every device).
  OptimizerStep(torch::optim::Optimizer& optimizer, std::string name, Kernel kernel);
  // The kernel for a device: fused on CUDA (where it also skips on found_inf), foreach elsewhere.
  static Kernel default_kernel(const c10::Device& device);

  // One update of every parameter with a gradient. found_inf (a 0-dim float tensor on the
  // parameters' device, 1 = skip) is honoured on the device by the fused kernels and by MuSGD
  // (gradients zeroed and every change scaled by 1 - found_inf); the other foreach kernels read
  // it on the host once, and only when it is given.
  void step(const std::optional<at::Tensor>& found_inf = std::nullopt);
  // Drops every gradient (set to none, as PyTorch's zero_grad default): no op dispatched.
  void zero_grad();
  // Writes the device-side step counts of Adam/AdamW back into the optimizer's states (one host
  // read); call before reading the optimizer's state for a checkpoint.
  void sync_state();
  Kernel kernel() const { return kernel_; }

 private:
  void sgd_group(torch::optim::OptimizerParamGroup& group, const std::optional<at::Tensor>& inf);
  void musgd_group(torch::optim::OptimizerParamGroup& group, bool muon, const at::Tensor& keep);
  void adam_group(torch::optim::OptimizerParamGroup& group, const std::optional<at::Tensor>& inf);

  torch::optim::Optimizer& opt_;
  std::string name_;
  Kernel kernel_;
  // Fused Adam/AdamW: steps skipped on the device since the last sync_state (float, 0-dim).
  at::Tensor skipped_;
};

}  // namespace yolo

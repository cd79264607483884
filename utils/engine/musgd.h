#pragma once
// Ultralytics' MuSGD (YOLO26's optimizer, and optimizer=auto's for runs over 10,000 iterations):
// the decayed weights (2-D and 4-D tensors) take a Muon step, Nesterov momentum orthogonalised by
// five Newton-Schulz iterations in bfloat16, at 0.2 x lr, then a Nesterov SGD step with weight
// decay at 1.0 x lr; biases and BatchNorm weights take the SGD step alone. Matrices of the same
// column count are orthogonalised together in one batch of matrix products.
#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/optim/optimizer.h>

#include <vector>

namespace yolo {

inline constexpr double kMuonLrFactor = 0.2, kMuonSgdLrFactor = 1.0;

// A parameter's state: SGD's momentum buffer and, for a Muon parameter, Muon's.
class MuSGDParamState : public torch::optim::OptimizerParamState {
 public:
  TORCH_ARG(at::Tensor, momentum_buffer);
  TORCH_ARG(at::Tensor, muon_buffer);
};

// Newton-Schulz orthogonalisation of a batch (n, rows, cols): an approximation of U V^T of each
// matrix's SVD, computed in bfloat16 and returned in bfloat16.
at::Tensor newton_schulz5(const at::Tensor& x);

// Muon's updates for grads with their momentum buffers (updated in place: buf = beta buf +
// (1 - beta) g; the update beta buf + (1 - beta) g, orthogonalised as a (rows, rest) matrix and
// scaled by sqrt(max(1, size(-2) / size(-1)))), in the gradients' shapes and dtype. Matrices are
// batched as Ultralytics batches them (by column count, rows within 16x, zero padded), so the
// bfloat16 rounding is the same. keep (a 0-dim float tensor on the buffers' device, 1 or 0), when
// given, leaves the buffers as they were where it is 0 (AMP's skipped step, decided on the device;
// the gradients must then be finite, e.g. zeroed); with 1 the result is the same as without it.
std::vector<at::Tensor> muon_updates(const std::vector<at::Tensor>& grads,
                                     const std::vector<at::Tensor>& bufs, double beta,
                                     const at::Tensor* keep = nullptr);

}  // namespace yolo

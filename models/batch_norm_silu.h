#pragma once

#include <torch/nn/modules/batchnorm.h>
#include <torch/types.h>

namespace yolo {

// BatchNorm2d followed by SiLU as one kernel on the CPU, for float32 activations in channels-last
// (NHWC) memory, CPU training's default layout. Forward makes two passes over the activation
// (batch statistics, then normalise and activate) and writes one tensor, where the two ATen ops
// make three passes and write two; backward makes two passes where they make three. Autograd
// keeps only the BatchNorm's input (the unfused pair also keeps its output for SiLU's backward),
// so a Conv block holds one activation for backward instead of two. Same mathematics as
// torch::silu(bn(x)), running statistics included; per-channel sums are kept in double, so results
// agree with the unfused ops to float rounding, not bit for bit.

// Whether batch_norm_silu can run `bn` on x here: a CPU float32 4-D tensor in channels-last
// memory, a BatchNorm with affine parameters, running statistics and a fixed momentum, and, in
// eval mode, no gradient to compute.
bool batch_norm_silu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn);

// silu(bn(x)) with bn's training or eval behaviour; in training, updates bn's running statistics
// and num_batches_tracked as BatchNorm2d's forward does. Call only where batch_norm_silu_applies.
torch::Tensor batch_norm_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn);

}  // namespace yolo

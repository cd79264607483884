#pragma once
// SyncBatchNorm for CPU (Gloo) and CUDA (NCCL): in training, the batch statistics are those of the
// whole global batch. Forward all-reduces per-channel count, sum and sum of squares; backward
// all-reduces the per-channel sums of the gradient and of gradient * (x - mean), so N ranks of
// B images compute what one process of N*B images computes. PyTorch's own is CUDA-only.
// It holds the same parameter and buffer names as BatchNorm2d, so state_dict keys do not change.
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/pimpl.h>

#include <memory>

#include "utils/distributed/distributed.h"

namespace yolo {

class SyncBatchNormImpl : public torch::nn::Module {
 public:
  // Takes over `bn`'s parameters and buffers (the same tensors, so an optimizer that holds them
  // keeps working, as torch.nn.SyncBatchNorm.convert_sync_batchnorm does).
  SyncBatchNormImpl(const torch::nn::BatchNorm2dImpl& bn, std::shared_ptr<ProcessGroup> pg);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double eps, momentum;

 private:
  std::shared_ptr<ProcessGroup> pg_;
};
TORCH_MODULE(SyncBatchNorm);

// Replaces every BatchNorm2d of `model`'s blocks (Conv, BottleneckCSP) with a SyncBatchNorm over
// `pg`; returns how many were replaced.
int convert_sync_batchnorm(torch::nn::Module& model, const std::shared_ptr<ProcessGroup>& pg);

}  // namespace yolo

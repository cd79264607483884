#include "utils/distributed/sync_batchnorm.h"

#include <torch/torch.h>

#include "models/common.h"

namespace yolo {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const std::vector<int64_t> kReduceDims = {0, 2, 3};

at::Tensor per_channel(const at::Tensor& v) { return v.view({1, -1, 1, 1}); }

// The group travels through autograd's saved_data as an integer (saved_data holds IValues only);
// the module that owns the shared_ptr outlives every graph it builds within a training step.
struct SyncBNFunction : public torch::autograd::Function<SyncBNFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, at::Tensor running_mean, at::Tensor running_var,
                            double eps, double momentum, ProcessGroup* pg) {
    TORCH_CHECK(x.dim() == 4, "SyncBatchNorm expects NCHW input, got ", x.dim(), " dims");
    const int64_t c = x.size(1);
    const int64_t local_count = x.numel() / c;
    TORCH_CHECK(local_count > 1 || pg->size() > 1,
                "SyncBatchNorm needs more than one value per channel when training");
    // Statistics in double from x in float32 at least: the variance comes from E[x^2] - E[x]^2,
    // which float rounds badly, and under autocast x is float16, whose squares overflow above
    // 256. The count stays a tensor, so no layer waits for the device (no .item()).
    const auto compute = at::promote_types(x.scalar_type(), torch::kFloat);
    const at::Tensor xc = x.to(compute);
    at::Tensor stats = torch::cat(
        {xc.sum(kReduceDims, false, torch::kDouble),
         xc.square().sum(kReduceDims, false, torch::kDouble),
         torch::full({1}, static_cast<double>(local_count), x.options().dtype(torch::kDouble))});
    pg->allreduce_sum(stats);
    const at::Tensor n = stats.slice(0, 2 * c, 2 * c + 1);
    const at::Tensor mean_d = stats.slice(0, 0, c) / n;
    const at::Tensor var_d = (stats.slice(0, c, 2 * c) / n - mean_d * mean_d).clamp_min(0);
    {
      torch::NoGradGuard no_grad;
      running_mean.mul_(1 - momentum).add_(mean_d.to(running_mean.dtype()), momentum);
      running_var.mul_(1 - momentum)
          .add_((var_d * n / (n - 1).clamp_min(1)).to(running_var.dtype()), momentum);
    }
    // Normalised in `compute`; the output has x's dtype, as BatchNorm's under autocast.
    const at::Tensor mean = mean_d.to(compute), invstd = (var_d + eps).rsqrt().to(compute);
    ctx->save_for_backward({x, weight, mean, invstd, n});
    ctx->saved_data["pg"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pg));
    const at::Tensor y =
        (xc - per_channel(mean)) * per_channel(invstd * weight) + per_channel(bias);
    return y.to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const at::Tensor& n = saved[4];
    auto* pg =
        reinterpret_cast<ProcessGroup*>(static_cast<intptr_t>(ctx->saved_data["pg"].toInt()));
    const auto compute = mean.scalar_type();
    // In x's layout: a channels-last model's gradients stay channels-last (no copy each way).
    const at::Tensor dy = grad_out[0].contiguous(x.suggest_memory_format()).to(compute);
    const int64_t c = x.size(1);
    const at::Tensor xmu = x.to(compute) - per_channel(mean);
    const at::Tensor sum_dy = dy.sum(kReduceDims, false, torch::kDouble);
    const at::Tensor sum_dy_xmu = (dy * xmu).sum(kReduceDims, false, torch::kDouble);
    // Weight and bias gradients stay local: the gradient all-reduce (DDP) averages them.
    const at::Tensor grad_weight = (sum_dy_xmu.to(compute) * invstd).to(weight.scalar_type());
    const at::Tensor grad_bias = sum_dy.to(weight.scalar_type());
    at::Tensor red = torch::cat({sum_dy, sum_dy_xmu});
    pg->allreduce_sum(red);
    const at::Tensor mean_dy = (red.slice(0, 0, c) / n).to(compute);
    const at::Tensor mean_dy_xmu = (red.slice(0, c, 2 * c) / n).to(compute);
    const at::Tensor grad_x =
        ((dy - per_channel(mean_dy) - xmu * per_channel(invstd * invstd * mean_dy_xmu)) *
         per_channel(invstd * weight))
            .to(x.scalar_type());
    return {grad_x,       grad_weight,  grad_bias,    at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

SyncBatchNormImpl::SyncBatchNormImpl(const torch::nn::BatchNorm2dImpl& bn,
                                     std::shared_ptr<ProcessGroup> pg)
    : eps(bn.options.eps()), momentum(bn.options.momentum().value_or(0.1)), pg_(std::move(pg)) {
  TORCH_CHECK(bn.options.affine() && bn.options.track_running_stats(),
              "SyncBatchNorm converts affine BatchNorm2d layers with running statistics only");
  TORCH_CHECK(pg_, "SyncBatchNorm needs a process group");
  weight = register_parameter("weight", bn.weight, bn.weight.requires_grad());
  bias = register_parameter("bias", bn.bias, bn.bias.requires_grad());
  running_mean = register_buffer("running_mean", bn.running_mean);
  running_var = register_buffer("running_var", bn.running_var);
  num_batches_tracked = register_buffer("num_batches_tracked", bn.num_batches_tracked);
  train(bn.is_training());
}

torch::Tensor SyncBatchNormImpl::forward(const torch::Tensor& x) {
  if (!is_training()) {
    return torch::batch_norm(x, weight, bias, running_mean, running_var, false, momentum, eps,
                             false);
  }
  {
    torch::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  return SyncBNFunction::apply(x, weight, bias, running_mean, running_var, eps, momentum,
                               pg_.get());
}

int convert_sync_batchnorm(torch::nn::Module& model, const std::shared_ptr<ProcessGroup>& pg) {
  int n = 0;
  for_each_norm_holder(model, [&](NormHolder& block) {
    auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(block.norm());
    if (!bn) return;
    block.replace_norm(torch::nn::AnyModule(SyncBatchNorm(*bn, pg)));
    ++n;
  });
  return n;
}

}  // namespace yolo

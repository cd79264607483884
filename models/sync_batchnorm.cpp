#include "models/sync_batchnorm.h"

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
    // Sums in double: the variance comes from E[x^2] - E[x]^2, which float would round badly.
    at::Tensor stats = torch::cat(
        {x.sum(kReduceDims, false, torch::kDouble), (x * x).sum(kReduceDims, false, torch::kDouble),
         torch::full({1}, static_cast<double>(x.numel() / c), x.options().dtype(torch::kDouble))});
    pg->allreduce_sum(stats);
    const double n = stats[2 * c].item<double>();
    TORCH_CHECK(n > 1, "SyncBatchNorm needs more than one value per channel over all ranks");
    const at::Tensor mean_d = stats.slice(0, 0, c) / n;
    const at::Tensor var_d = (stats.slice(0, c, 2 * c) / n - mean_d * mean_d).clamp_min(0);
    {
      torch::NoGradGuard no_grad;
      running_mean.mul_(1 - momentum).add_(mean_d.to(running_mean.dtype()), momentum);
      running_var.mul_(1 - momentum)
          .add_((var_d * (n / (n - 1))).to(running_var.dtype()), momentum);
    }
    const at::Tensor mean = mean_d.to(x.dtype()), invstd = (var_d + eps).rsqrt().to(x.dtype());
    ctx->save_for_backward({x, weight, mean, invstd});
    ctx->saved_data["n"] = n;
    ctx->saved_data["pg"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pg));
    return (x - per_channel(mean)) * per_channel(invstd * weight) + per_channel(bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const double n = ctx->saved_data["n"].toDouble();
    auto* pg =
        reinterpret_cast<ProcessGroup*>(static_cast<intptr_t>(ctx->saved_data["pg"].toInt()));
    const at::Tensor dy = grad_out[0].contiguous();
    const int64_t c = x.size(1);
    const at::Tensor xmu = x - per_channel(mean);
    const at::Tensor sum_dy = dy.sum(kReduceDims, false, torch::kDouble);
    const at::Tensor sum_dy_xmu = (dy * xmu).sum(kReduceDims, false, torch::kDouble);
    // Weight and bias gradients stay local: the gradient all-reduce (DDP) averages them.
    const at::Tensor grad_weight = (sum_dy_xmu.to(x.dtype()) * invstd);
    const at::Tensor grad_bias = sum_dy.to(x.dtype());
    at::Tensor red = torch::cat({sum_dy, sum_dy_xmu});
    pg->allreduce_sum(red);
    const at::Tensor mean_dy = (red.slice(0, 0, c) / n).to(x.dtype());
    const at::Tensor mean_dy_xmu = (red.slice(0, c, 2 * c) / n).to(x.dtype());
    const at::Tensor grad_x =
        (dy - per_channel(mean_dy) - xmu * per_channel(invstd * invstd * mean_dy_xmu)) *
        per_channel(invstd * weight);
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
  for_each_conv(model, [&](ConvImpl& conv) {
    auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(conv.norm());
    if (!bn) return;
    conv.replace_norm(torch::nn::AnyModule(SyncBatchNorm(*bn, pg)));
    ++n;
  });
  return n;
}

}  // namespace yolo

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/batch_norm_silu.h"
#include "models/common.h"
#include "models/yolo.h"

namespace {

using torch::nn::BatchNorm2d;
using torch::nn::BatchNorm2dOptions;

BatchNorm2d make_bn(int64_t c) {
  BatchNorm2d bn(BatchNorm2dOptions(c).eps(1e-3).momentum(0.03));
  torch::NoGradGuard no_grad;
  bn->weight.uniform_(0.5, 1.5);
  bn->bias.uniform_(-0.5, 0.5);
  bn->running_mean.uniform_(-1, 1);
  bn->running_var.uniform_(0.5, 2);
  return bn;
}

BatchNorm2d copy_of(const BatchNorm2d& bn) {
  return std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(bn->clone());
}

// Conv outputs seen in training: an offset mean, a spread of scales, channels-last memory.
torch::Tensor activation(std::vector<int64_t> shape, double offset = 4.0) {
  return (torch::randn(shape) * 3 + offset).contiguous(at::MemoryFormat::ChannelsLast);
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double err = (got - want).abs().max().item<double>();
  const double scale = want.abs().max().item<double>() + 1e-12;
  EXPECT_LE(err / scale, tol) << what << ": max abs error " << err << " against max " << scale;
}

TEST(BatchNormSilu, TrainingForwardMatchesBatchNormThenSilu) {
  torch::manual_seed(0);
  auto bn = make_bn(48);
  auto ref = copy_of(bn);
  const torch::Tensor x = activation({4, 48, 13, 11});
  ASSERT_TRUE(yolo::batch_norm_silu_applies(x, *bn));
  const torch::Tensor z = yolo::batch_norm_silu(x, *bn);
  const torch::Tensor want = torch::silu(ref->forward(x));
  expect_close(z, want, 2e-6, "output");
  EXPECT_TRUE(z.is_contiguous(at::MemoryFormat::ChannelsLast));
  expect_close(bn->running_mean, ref->running_mean, 1e-6, "running_mean");
  expect_close(bn->running_var, ref->running_var, 1e-6, "running_var");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
}

TEST(BatchNormSilu, TrainingGradientsMatchBatchNormThenSilu) {
  torch::manual_seed(1);
  for (int64_t c : {16, 37, 128}) {
    auto bn = make_bn(c);
    auto ref = copy_of(bn);
    const torch::Tensor x0 = activation({3, c, 9, 10}, -2.0);
    const torch::Tensor x1 = x0.detach().clone().requires_grad_(true);
    const torch::Tensor x2 = x0.detach().clone().requires_grad_(true);
    // The upstream gradient arrives as a slice of a wider tensor, as through torch::cat.
    const torch::Tensor up =
        torch::randn({3, c + 5, 9, 10}).contiguous(at::MemoryFormat::ChannelsLast);
    const torch::Tensor gz = up.narrow(1, 2, c);
    (yolo::batch_norm_silu(x1, *bn) * gz).sum().backward();
    (torch::silu(ref->forward(x2)) * gz).sum().backward();
    expect_close(x1.grad(), x2.grad(), 1e-5, "input gradient");
    expect_close(bn->weight.grad(), ref->weight.grad(), 1e-5, "weight gradient");
    expect_close(bn->bias.grad(), ref->bias.grad(), 1e-5, "bias gradient");
  }
}

TEST(BatchNormSilu, EvalUsesRunningStatistics) {
  torch::manual_seed(2);
  auto bn = make_bn(24);
  bn->eval();
  auto ref = copy_of(bn);
  const torch::Tensor x = activation({2, 24, 7, 7});
  torch::NoGradGuard no_grad;
  ASSERT_TRUE(yolo::batch_norm_silu_applies(x, *bn));
  expect_close(yolo::batch_norm_silu(x, *bn), torch::silu(ref->forward(x)), 2e-6, "eval output");
  EXPECT_TRUE(bn->running_mean.equal(ref->running_mean));
}

TEST(BatchNormSilu, LeavesOtherCasesToBatchNorm) {
  auto bn = make_bn(8);
  const torch::Tensor nhwc = activation({2, 8, 5, 5});
  EXPECT_FALSE(yolo::batch_norm_silu_applies(nhwc.contiguous(), *bn)) << "NCHW memory";
  EXPECT_FALSE(yolo::batch_norm_silu_applies(nhwc.to(torch::kDouble), *bn)) << "float64";
  EXPECT_FALSE(yolo::batch_norm_silu_applies(activation({1, 8, 1, 1}), *bn))
      << "one value per channel";
  EXPECT_FALSE(yolo::batch_norm_silu_applies(activation({2, 4, 5, 5}), *bn)) << "channels";
  bn->eval();
  EXPECT_FALSE(yolo::batch_norm_silu_applies(nhwc, *bn)) << "eval with parameters needing grad";
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(yolo::batch_norm_silu_applies(nhwc, *bn));
}

TEST(BatchNormSilu, SaturatesWithoutNaN) {
  auto bn = make_bn(16);
  bn->eval();
  torch::NoGradGuard no_grad;
  bn->running_mean.zero_();
  bn->running_var.fill_(1);
  bn->weight.fill_(1);
  bn->bias.zero_();
  const torch::Tensor x =
      torch::linspace(-1e4, 1e4, 2 * 16 * 4 * 4).view({2, 4, 4, 16}).permute({0, 3, 1, 2});
  ASSERT_TRUE(x.is_contiguous(at::MemoryFormat::ChannelsLast));
  const torch::Tensor z = yolo::batch_norm_silu(x, *bn);
  EXPECT_FALSE(z.isnan().any().item<bool>());
  expect_close(z, torch::silu(x / std::sqrt(1 + 1e-3)), 1e-6, "saturated output");
}

// A Conv block in channels-last memory trains as the same block in NCHW memory.
TEST(BatchNormSilu, ConvBlockInChannelsLastTrainsAsInNchw) {
  torch::manual_seed(3);
  yolo::Conv a(8, 32, 3, 1);
  yolo::Conv b(8, 32, 3, 1);
  {
    torch::NoGradGuard no_grad;
    auto pa = a->named_parameters(), pb = b->named_parameters();
    for (const auto& p : pa) pb[p.key()].copy_(p.value());
  }
  yolo::to_channels_last(*a);
  const torch::Tensor x = torch::randn({2, 8, 12, 12});
  const torch::Tensor ya = a->forward(x.contiguous(at::MemoryFormat::ChannelsLast));
  const torch::Tensor yb = b->forward(x);
  expect_close(ya, yb, 1e-5, "output");
  ya.square().sum().backward();
  yb.square().sum().backward();
  expect_close(a->conv->weight.grad(), b->conv->weight.grad(), 1e-4, "conv weight gradient");
}

}  // namespace

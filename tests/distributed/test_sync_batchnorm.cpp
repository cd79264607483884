// SyncBatchNorm's numerics on one process: with a mirror group (a second rank holding the same
// batch) the global statistics are the local ones, so it must equal BatchNorm2d on this batch.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <memory>

#include "models/common.h"
#include "tests/distributed/mirror_group.h"
#include "utils/core/runtime/grad_scaler.h"
#include "utils/distributed/sync_batchnorm.h"

namespace {

using yolo::test_support::MirrorGroup;

struct Pair {
  torch::nn::BatchNorm2d bn{nullptr}, src{nullptr};
  yolo::SyncBatchNorm sync{nullptr};
};

// A BatchNorm2d reference and a SyncBatchNorm made from an identical copy of it.
Pair make_pair(int64_t c) {
  Pair p;
  p.bn = torch::nn::BatchNorm2d(c);
  p.src = torch::nn::BatchNorm2d(c);
  torch::manual_seed(7);
  {
    torch::NoGradGuard g;
    p.bn->weight.uniform_(0.5, 1.5);
    p.bn->bias.uniform_(-0.5, 0.5);
    p.src->weight.copy_(p.bn->weight);
    p.src->bias.copy_(p.bn->bias);
  }
  p.sync = yolo::SyncBatchNorm(*p.src, std::make_shared<MirrorGroup>());
  return p;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// float16 activations above 256 square past float16's range (65504): the statistics must be
// taken in a wider type or the variance is inf and the output NaN. On CUDA the input comes from a
// convolution under autocast, as in training with AMP.
void expect_float16_matches_batchnorm(const torch::Device& device) {
  Pair p = make_pair(4);
  p.bn->to(device);
  p.sync->to(device);
  torch::manual_seed(1);
  const torch::Tensor x32 = (torch::rand({2, 4, 6, 6}) * 700 + 300).to(device);  // 300 .. 1000
  torch::Tensor x16;
  {
    yolo::AutocastScope autocast(device.is_cuda(), device.type());
    // An identity 1x1 convolution: under CUDA autocast its output is float16.
    const torch::Tensor eye = torch::eye(4, x32.options()).view({4, 4, 1, 1});
    x16 = device.is_cuda() ? torch::conv2d(x32, eye) : x32.to(torch::kHalf);
  }
  x16 = x16.detach().requires_grad_();
  ASSERT_EQ(x16.scalar_type(), torch::kHalf);
  const torch::Tensor xr = x16.detach().to(torch::kFloat).requires_grad_();
  torch::Tensor y;
  {
    yolo::AutocastScope autocast(device.is_cuda(), device.type());
    y = p.sync->forward(x16);
  }
  const torch::Tensor ref = p.bn->forward(xr);
  ASSERT_EQ(y.scalar_type(), torch::kHalf);
  ASSERT_TRUE(torch::isfinite(y).all().item<bool>()) << "non-finite output";
  EXPECT_LT(max_diff(y, ref), 1e-2);  // float16 output rounding (|y| < 3)
  const torch::Tensor w = torch::randn(ref.sizes()).to(device);
  (y.to(torch::kFloat) * w).sum().backward();
  (ref * w).sum().backward();
  ASSERT_TRUE(torch::isfinite(x16.grad()).all().item<bool>());
  EXPECT_LT(max_diff(x16.grad(), xr.grad()), 1e-3);
  EXPECT_LT(max_diff(p.sync->weight.grad(), p.bn->weight.grad()), 1e-2);
  // The mirror's global batch is twice this one: its unbiased variance uses 2n - 1.
  const double n = 2.0 * x16.numel() / x16.size(1);
  const torch::Tensor var = xr.detach().to(torch::kDouble).var({0, 2, 3}, /*unbiased=*/false);
  const torch::Tensor want = 0.9 + 0.1 * var * n / (n - 1);
  EXPECT_LT(max_diff(p.sync->running_var, want), 1e-6 * want.max().item<double>());
}

}  // namespace

TEST(SyncBatchNorm, Float16ActivationsAbove300StayFiniteAndMatchBatchNorm) {
  expect_float16_matches_batchnorm(torch::kCPU);
}

TEST(SyncBatchNorm, CudaUnderAutocastMatchesBatchNorm) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_float16_matches_batchnorm(torch::Device(torch::kCUDA, 0));
}

// bfloat16 (CPU autocast's type) keeps BatchNorm's dtype contract: output in the input's type,
// statistics and parameters in float32.
TEST(SyncBatchNorm, BFloat16InputGivesBFloat16OutputAndFloatStatistics) {
  Pair p = make_pair(3);
  torch::manual_seed(2);
  const torch::Tensor x = torch::randn({4, 3, 5, 5});
  const torch::Tensor y = p.sync->forward(x.to(torch::kBFloat16));
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(p.sync->running_mean.scalar_type(), torch::kFloat);
  EXPECT_LT(max_diff(y, p.bn->forward(x.to(torch::kBFloat16).to(torch::kFloat))), 5e-2);
  EXPECT_LT(max_diff(p.sync->running_mean, p.bn->running_mean), 1e-5);
}

// No layer may wait for the device: .item() or any other host read fails on "meta" tensors,
// which have shapes but no data, while the arithmetic itself runs.
TEST(SyncBatchNorm, ForwardAndBackwardReadNothingBackToTheHost) {
  Pair p = make_pair(4);
  // Module::to(kMeta) refuses to swap CPU parameters for meta ones; forward reads these members.
  const auto meta = torch::TensorOptions().device(torch::kMeta);
  p.sync->weight = torch::empty({4}, meta).requires_grad_();
  p.sync->bias = torch::empty({4}, meta).requires_grad_();
  p.sync->running_mean = torch::empty({4}, meta);
  p.sync->running_var = torch::empty({4}, meta);
  p.sync->num_batches_tracked = torch::empty({}, meta.dtype(torch::kLong));
  const torch::Tensor x = torch::empty({2, 4, 6, 6}, torch::kMeta).requires_grad_();
  torch::Tensor y;
  ASSERT_NO_THROW(y = p.sync->forward(x));
  EXPECT_EQ(y.sizes(), x.sizes());
  ASSERT_NO_THROW(y.sum().backward());
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

// A channels-last model's gradients stay channels-last through SyncBatchNorm's backward: no layer
// turns them to NCHW and the next one back.
TEST(SyncBatchNorm, ChannelsLastGradientsKeepTheirLayout) {
  Pair p = make_pair(4);
  torch::manual_seed(2);
  const auto cl = at::MemoryFormat::ChannelsLast;
  const torch::Tensor x = torch::rand({2, 4, 6, 6}).contiguous(cl).requires_grad_();
  const torch::Tensor xr = x.detach().clone().requires_grad_();
  bool grad_channels_last = false;
  x.register_hook([&](const torch::Tensor& g) { grad_channels_last = g.is_contiguous(cl); });
  const torch::Tensor y = p.sync->forward(x);
  EXPECT_TRUE(y.is_contiguous(cl));
  const torch::Tensor w = torch::randn(y.sizes()).contiguous(cl);  // as a channels-last conv's
  (y * w).sum().backward();
  (p.bn->forward(xr) * w).sum().backward();
  EXPECT_TRUE(grad_channels_last) << "the input gradient came back NCHW";
  EXPECT_LT(max_diff(x.grad(), xr.grad()), 1e-5);
}

// --sync-bn converts every BatchNorm2d of a model, BottleneckCSP's own included, and the model
// still gives BatchNorm's outputs (a mirror group's statistics are the local ones).
TEST(SyncBatchNorm, ConversionReachesEveryBlockWithANormLayer) {
  torch::manual_seed(3);
  yolo::BottleneckCSP ref(8, 8, 2), csp(8, 8, 2);
  {
    torch::NoGradGuard g;
    auto a = ref->parameters(), b = csp->parameters();
    for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
  }
  // cv1, cv4, two Bottlenecks of two Convs each, and the block's own bn.
  EXPECT_EQ(yolo::convert_sync_batchnorm(*csp, std::make_shared<MirrorGroup>()), 7);
  for (const auto& m : csp->modules()) {
    EXPECT_EQ(dynamic_cast<torch::nn::BatchNorm2dImpl*>(m.get()), nullptr) << m->name();
  }
  const torch::Tensor x = torch::randn({2, 8, 6, 6});
  EXPECT_TRUE(torch::allclose(csp->forward(x), ref->forward(x), 1e-4, 1e-5));
  EXPECT_EQ(csp->named_parameters().keys(), ref->named_parameters().keys());  // same state names
}

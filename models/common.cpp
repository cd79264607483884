#include "models/common.h"

#include <torch/torch.h>

namespace yolo {

namespace {
int autopad(int k, int p, int d) {
  if (p >= 0) return p;
  if (d > 1) k = d * (k - 1) + 1;
  return k / 2;
}
}  // namespace

ConvImpl::ConvImpl(int c1, int c2, int k, int s, int p, int g, int d, bool act)
    : act_(act), pad_(autopad(k, p, d)) {
  conv = register_module(
      "conv",
      torch::nn::Conv2d(
          torch::nn::Conv2dOptions(c1, c2, k).stride(s).padding(pad_).groups(g).dilation(d).bias(
              false)));
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(c2).eps(kBnEps).momentum(kBnMomentum));
  bn_ = torch::nn::AnyModule(bn);
  register_module("bn", bn);
}

torch::Tensor ConvImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = conv->forward(x);
  if (!fused_) y = bn_.forward(y);
  return act_ ? torch::silu(y) : y;
}

void ConvImpl::replace_norm(torch::nn::AnyModule norm) {
  TORCH_CHECK(!fused_, "cannot replace the norm layer of a fused Conv");
  bn_ = std::move(norm);
  replace_module("bn", bn_.ptr());
}

void ConvImpl::fuse() {
  if (fused_) return;
  auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(bn_.ptr());
  TORCH_CHECK(bn, "Conv::fuse supports BatchNorm2d only (convert SyncBatchNorm back first)");
  torch::NoGradGuard no_grad;
  const auto& o = conv->options;
  torch::nn::Conv2d fused(
      torch::nn::Conv2dOptions(o.in_channels(), o.out_channels(), o.kernel_size())
          .stride(o.stride())
          .padding(o.padding())
          .groups(o.groups())
          .dilation(o.dilation())
          .bias(true));
  fused->to(conv->weight.device(), conv->weight.scalar_type());
  const torch::Tensor scale = bn->weight / torch::sqrt(bn->running_var + bn->options.eps());
  fused->weight.copy_(conv->weight * scale.view({-1, 1, 1, 1}));
  fused->bias.copy_(bn->bias - bn->running_mean * scale);
  conv = replace_module("conv", fused);
  unregister_module("bn");
  bn_ = torch::nn::AnyModule();
  fused_ = true;
}

BottleneckImpl::BottleneckImpl(int c1, int c2, bool shortcut, int g, double e) {
  const int c_ = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1));
  cv2 = register_module("cv2", Conv(c_, c2, 3, 1, -1, g));
  add_ = shortcut && c1 == c2;
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = cv2->forward(cv1->forward(x));
  return add_ ? x + y : y;
}

C3Impl::C3Impl(int c1, int c2, int n, bool shortcut, int g, double e) {
  const int c_ = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1));
  cv2 = register_module("cv2", Conv(c1, c_, 1, 1));
  cv3 = register_module("cv3", Conv(2 * c_, c2, 1));
  torch::nn::Sequential seq;
  for (int i = 0; i < n; ++i) seq->push_back(Bottleneck(c_, c_, shortcut, g, 1.0));
  m = register_module("m", seq);
}

torch::Tensor C3Impl::forward(const torch::Tensor& x) {
  return cv3->forward(torch::cat({m->forward(cv1->forward(x)), cv2->forward(x)}, 1));
}

SPPFImpl::SPPFImpl(int c1, int c2, int k) {
  const int c_ = c1 / 2;
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1));
  cv2 = register_module("cv2", Conv(c_ * 4, c2, 1, 1));
  m = register_module(
      "m", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(k).stride(1).padding(k / 2)));
}

torch::Tensor SPPFImpl::forward(const torch::Tensor& x) {
  const torch::Tensor a = cv1->forward(x);
  const torch::Tensor y1 = m->forward(a);
  const torch::Tensor y2 = m->forward(y1);
  return cv2->forward(torch::cat({a, y1, y2, m->forward(y2)}, 1));
}

void for_each_conv(torch::nn::Module& module, const std::function<void(ConvImpl&)>& fn) {
  for (const auto& child : module.modules(/*include_self=*/true)) {
    if (auto* c = dynamic_cast<ConvImpl*>(child.get())) fn(*c);
  }
}

}  // namespace yolo

#include "models/csp_attention.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace yolo {

AttentionImpl::AttentionImpl(int dim, int num_heads, double attn_ratio)
    : num_heads_(num_heads), head_dim_(dim / num_heads) {
  key_dim_ = static_cast<int>(head_dim_ * attn_ratio);
  scale_ = std::pow(static_cast<double>(key_dim_), -0.5);
  const int h = dim + 2 * key_dim_ * num_heads;
  qkv = register_module("qkv", Conv(dim, h, 1, 1, -1, 1, 1, false));
  proj = register_module("proj", Conv(dim, dim, 1, 1, -1, 1, 1, false));
  pe = register_module("pe", Conv(dim, dim, 3, 1, -1, dim, 1, false));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const auto parts = qkv->forward(x)
                         .view({b, num_heads_, 2 * key_dim_ + head_dim_, h * w})
                         .split_with_sizes({key_dim_, key_dim_, head_dim_}, 2);
  const torch::Tensor &q = parts[0], &k = parts[1], &v = parts[2];
  const torch::Tensor attn = torch::matmul((q * scale_).transpose(-2, -1), k).softmax(-1);
  torch::Tensor y = torch::matmul(v, attn.transpose(-2, -1)).view({b, c, h, w}) +
                    pe->forward(v.reshape({b, c, h, w}));
  return proj->forward(y);
}

PSABlockImpl::PSABlockImpl(int c, double attn_ratio, int num_heads, bool shortcut)
    : add_(shortcut) {
  attn = register_module("attn", Attention(c, num_heads, attn_ratio));
  ffn = register_module(
      "ffn", torch::nn::Sequential(Conv(c, 2 * c, 1), Conv(2 * c, c, 1, 1, -1, 1, 1, false)));
}

torch::Tensor PSABlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = add_ ? x + attn->forward(x) : attn->forward(x);
  return add_ ? y + ffn->forward(y) : ffn->forward(y);
}

void C2fImpl::init(int c1, int c2, int n, double e) {
  c_ = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, 2 * c_, 1, 1));
  cv2 = register_module("cv2", Conv((2 + n) * c_, c2, 1));
  m = register_module("m", torch::nn::ModuleList());
}

namespace {
template <typename Holder>
C2fImpl::Block block_of(const Holder& h) {
  return {h.ptr(), [p = h.ptr()](const torch::Tensor& x) { return p->forward(x); }};
}
}  // namespace

C2fImpl::C2fImpl(int c1, int c2, int n, bool shortcut, int g, double e)
    : C2fImpl(c1, c2, n, e, [&](int c) {
        return block_of(Bottleneck(c, c, shortcut, g, 1.0, std::array<int, 2>{3, 3}));
      }) {}

C2fImpl::C2fImpl(int c1, int c2, int n, double e, const std::function<Block(int c)>& block) {
  init(c1, c2, n, e);
  for (int i = 0; i < n; ++i) {
    blocks_.push_back(block(c_));
    m->push_back(blocks_.back().module);
  }
}

torch::Tensor C2fImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> y = cv1->forward(x).chunk(2, 1);
  y.reserve(2 + blocks_.size());
  for (const auto& b : blocks_) y.push_back(b.run(y.back()));
  return cv2->forward(torch::cat(y, 1));
}

C2f make_c3k2(int c1, int c2, int n, bool c3k, double e, bool attn, int g, bool shortcut) {
  return C2f(c1, c2, n, e, [&](int c) {
    if (attn) {
      return block_of(make_chain(Bottleneck(c, c, shortcut, g, 0.5, std::array<int, 2>{3, 3}),
                                 PSABlock(c, 0.5, std::max(c / 64, 1))));
    }
    if (c3k) return block_of(C3(c, c, 2, shortcut, g, 0.5, std::array<int, 2>{3, 3}));
    return block_of(Bottleneck(c, c, shortcut, g, 0.5, std::array<int, 2>{3, 3}));
  });
}

C2PSAImpl::C2PSAImpl(int c1, int c2, int n, double e) : c_(static_cast<int>(c1 * e)) {
  if (c1 != c2) {
    throw std::invalid_argument("C2PSA needs as many output channels as input (" +
                                std::to_string(c1) + " in, " + std::to_string(c2) + " out)");
  }
  cv1 = register_module("cv1", Conv(c1, 2 * c_, 1, 1));
  cv2 = register_module("cv2", Conv(2 * c_, c1, 1));
  m = register_module("m", torch::nn::Sequential());
  for (int i = 0; i < n; ++i) m->push_back(PSABlock(c_, 0.5, std::max(c_ / 64, 1)));
}

torch::Tensor C2PSAImpl::forward(const torch::Tensor& x) {
  const auto ab = cv1->forward(x).split(c_, 1);
  return cv2->forward(torch::cat({ab[0], m->forward(ab[1])}, 1));
}

DFLImpl::DFLImpl(int c1) : c1_(c1) {
  conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, 1, 1).bias(false)));
  torch::NoGradGuard no_grad;
  conv->weight.copy_(torch::arange(c1, torch::kFloat).view({1, c1, 1, 1}));
  conv->weight.set_requires_grad(false);
}

torch::Tensor DFLImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), a = x.size(2);
  return conv->forward(x.view({b, 4, c1_, a}).transpose(2, 1).softmax(1)).view({b, 4, a});
}

}  // namespace yolo

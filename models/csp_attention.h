#pragma once
// The building blocks of Ultralytics' anchor-free models (YOLOv8, YOLO11): C2f, C3k2 (with C3k or
// attention inside), C2PSA and its PSABlock and Attention, and the head's DFL. Member names match
// Ultralytics' attributes, so state_dict keys match theirs (model.2.cv1.conv.weight,
// model.10.m.0.attn.qkv.conv.weight, model.22.dfl.conv.weight, ...).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/common.h"

namespace yolo {

// Modules run one after the other, registered as "0", "1", ... (the names nn.Sequential gives);
// unlike torch::nn::Sequential it can hold another Chain.
class ChainImpl : public torch::nn::Module {
 public:
  template <typename Holder>
  void add(const Holder& h) {
    register_module(std::to_string(runs_.size()), h);
    runs_.push_back([p = h.ptr()](const torch::Tensor& x) { return p->forward(x); });
    last_ = h.ptr();
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = x;
    for (const auto& r : runs_) y = r(y);
    return y;
  }
  std::shared_ptr<torch::nn::Module> last() const { return last_; }

 private:
  std::vector<std::function<torch::Tensor(const torch::Tensor&)>> runs_;
  std::shared_ptr<torch::nn::Module> last_;
};
TORCH_MODULE(Chain);

template <typename... Holders>
Chain make_chain(const Holders&... h) {
  Chain c;
  (c->add(h), ...);
  return c;
}

// Multi-head self-attention over the positions of a feature map; queries and keys have half the
// head's width (attn_ratio), values the full width, and a depthwise 3x3 `pe` adds position.
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int dim, int num_heads, double attn_ratio = 0.5);
  torch::Tensor forward(const torch::Tensor& x);
  int num_heads() const { return num_heads_; }
  int key_dim() const { return key_dim_; }
  int head_dim() const { return head_dim_; }
  double scale() const { return scale_; }
  Conv qkv{nullptr}, proj{nullptr}, pe{nullptr};

 private:
  int num_heads_, head_dim_, key_dim_;
  double scale_;
};
TORCH_MODULE(Attention);

// x + attn(x), then + ffn(x) (1x1 Convs to 2c and back).
class PSABlockImpl : public torch::nn::Module {
 public:
  PSABlockImpl(int c, double attn_ratio, int num_heads, bool shortcut = true);
  torch::Tensor forward(const torch::Tensor& x);
  bool shortcut() const { return add_; }
  Attention attn{nullptr};
  torch::nn::Sequential ffn{nullptr};

 private:
  bool add_;
};
TORCH_MODULE(PSABlock);

// C2f: cv1 to 2c channels split in halves; each block of `m` runs on the newest tensor, and cv2
// joins all of them. C3k2 is this structure with other blocks (make_c3k2).
class C2fImpl : public torch::nn::Module {
 public:
  // One block of `m`: the module (registered) and how to run it.
  struct Block {
    std::shared_ptr<torch::nn::Module> module;
    std::function<torch::Tensor(const torch::Tensor&)> run;
  };
  // C2f's own blocks: Bottleneck(c, c, shortcut, g, e=1, kernels 3 and 3).
  C2fImpl(int c1, int c2, int n = 1, bool shortcut = false, int g = 1, double e = 0.5);
  // The blocks made by `block(c)` (c = the hidden width).
  C2fImpl(int c1, int c2, int n, double e, const std::function<Block(int c)>& block);
  torch::Tensor forward(const torch::Tensor& x);
  int hidden() const { return c_; }  // each half of cv1's output
  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::ModuleList m{nullptr};

 private:
  void init(int c1, int c2, int n, double e);
  int c_ = 0;
  std::vector<Block> blocks_;
};
TORCH_MODULE(C2f);

// Ultralytics' C3k2: C2f's structure whose blocks are a C3k (a C3 of two Bottlenecks with 3x3
// kernels) when c3k, a Bottleneck followed by a PSABlock when attn, else a Bottleneck (e=0.5).
C2f make_c3k2(int c1, int c2, int n, bool c3k, double e, bool attn, int g, bool shortcut);

// C2PSA: cv1 split in halves, n PSABlocks on the second, cv2 over both. c1 must equal c2.
class C2PSAImpl : public torch::nn::Module {
 public:
  C2PSAImpl(int c1, int c2, int n = 1, double e = 0.5);
  torch::Tensor forward(const torch::Tensor& x);
  int hidden() const { return c_; }  // each half of cv1's output
  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::Sequential m{nullptr};

 private:
  int c_;
};
TORCH_MODULE(C2PSA);

// Distribution focal loss's integral: a softmax over `c1` bins per box side and its expectation,
// as a frozen 1x1 convolution whose weight is 0, 1, ..., c1-1 (a parameter without gradient, as
// Ultralytics keeps it). (b, 4*c1, a) -> (b, 4, a).
class DFLImpl : public torch::nn::Module {
 public:
  explicit DFLImpl(int c1 = 16);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv2d conv{nullptr};

 private:
  int c1_;
};
TORCH_MODULE(DFL);

}  // namespace yolo

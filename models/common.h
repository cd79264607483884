#pragma once
// YOLOv5 v7.0 building blocks. Member names match YOLOv5's attribute names so that state_dict
// keys match (conv, bn, cv1, cv2, cv3, m).
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

namespace yolo {

// YOLOv5's BatchNorm settings (utils/torch_utils initialize_weights).
constexpr double kBnEps = 1e-3;
constexpr double kBnMomentum = 0.03;

// Conv2d (no bias) + BatchNorm2d + SiLU. `p` < 0 means "same" padding (YOLOv5's autopad).
class ConvImpl : public torch::nn::Module {
 public:
  ConvImpl(int c1, int c2, int k = 1, int s = 1, int p = -1, int g = 1, int d = 1, bool act = true);
  torch::Tensor forward(const torch::Tensor& x);

  // Folds the BatchNorm into the convolution (inference only); later forwards skip the BN.
  void fuse();
  bool fused() const { return fused_; }
  bool act() const { return act_; }     // SiLU after the convolution
  int padding() const { return pad_; }  // the same on both sides and in both dimensions
  // The normalisation layer: a BatchNorm2d, or whatever replace_norm installed (SyncBatchNorm).
  std::shared_ptr<torch::nn::Module> norm() const { return bn_.ptr(); }
  void replace_norm(torch::nn::AnyModule norm);

  torch::nn::Conv2d conv{nullptr};

 private:
  torch::nn::AnyModule bn_;
  bool act_;
  int pad_;
  bool fused_ = false;
};
TORCH_MODULE(Conv);

class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int c1, int c2, bool shortcut = true, int g = 1, double e = 0.5);
  torch::Tensor forward(const torch::Tensor& x);
  bool shortcut() const { return add_; }  // adds the input to cv2's output
  Conv cv1{nullptr}, cv2{nullptr};

 private:
  bool add_;
};
TORCH_MODULE(Bottleneck);

// CSP bottleneck with 3 convolutions.
class C3Impl : public torch::nn::Module {
 public:
  C3Impl(int c1, int c2, int n = 1, bool shortcut = true, int g = 1, double e = 0.5);
  torch::Tensor forward(const torch::Tensor& x);
  Conv cv1{nullptr}, cv2{nullptr}, cv3{nullptr};
  torch::nn::Sequential m{nullptr};
};
TORCH_MODULE(C3);

// Spatial pyramid pooling, fast: three chained max-pools equal SPP(k=(5, 9, 13)).
class SPPFImpl : public torch::nn::Module {
 public:
  SPPFImpl(int c1, int c2, int k = 5);
  torch::Tensor forward(const torch::Tensor& x);
  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::MaxPool2d m{nullptr};
};
TORCH_MODULE(SPPF);

// Applies `fn` to every Conv block in `module`'s tree.
void for_each_conv(torch::nn::Module& module, const std::function<void(ConvImpl&)>& fn);

}  // namespace yolo

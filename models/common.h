#pragma once
// YOLOv5 v7.0 building blocks. Member names match YOLOv5's attribute names so that state_dict
// keys match (conv, bn, cv1, cv2, cv3, m).
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace yolo {

// YOLOv5's BatchNorm settings (utils/torch_utils initialize_weights).
constexpr double kBnEps = 1e-3;
constexpr double kBnMomentum = 0.03;

// The activation of Conv blocks: SiLU, or what a model YAML's `activation:` names (YOLOv5's
// Conv.default_act, e.g. `nn.LeakyReLU(0.1)`).
struct Activation {
  enum class Kind {
    kIdentity,
    kSiLU,
    kReLU,
    kLeakyReLU,
    kReLU6,
    kHardswish,
    kSigmoid,
    kTanh,
    kGELU,
    kMish,
    kELU
  };
  Kind kind = Kind::kSiLU;
  double alpha = 0;  // kLeakyReLU: the negative slope; kELU: alpha

  torch::Tensor operator()(const torch::Tensor& x) const;
  std::string text() const;  // as YOLOv5 writes it: "nn.SiLU()", "nn.LeakyReLU(0.1)"
  // Reads "nn.ReLU()", "nn.LeakyReLU(0.1)", "torch.nn.SiLU()", ...; throws std::invalid_argument
  // listing what is supported.
  static Activation parse(const std::string& text);
};

// While one lives, Conv blocks built with act=True use `activation` (the model YAML's); the
// previous default comes back when it ends. Per thread.
class DefaultActivation {
 public:
  explicit DefaultActivation(const Activation& activation);
  ~DefaultActivation();
  DefaultActivation(const DefaultActivation&) = delete;
  DefaultActivation& operator=(const DefaultActivation&) = delete;
  static const Activation& current();

 private:
  Activation saved_;
};

// Conv2d (no bias) + BatchNorm2d + activation. `p` < 0 means "same" padding (YOLOv5's autopad).
// A block whose normalisation layer SyncBatchNorm may replace (Conv, BottleneckCSP).
class NormHolder {
 public:
  virtual ~NormHolder() = default;
  // The normalisation layer: a BatchNorm2d, or whatever replace_norm installed (SyncBatchNorm).
  virtual std::shared_ptr<torch::nn::Module> norm() const = 0;
  virtual void replace_norm(torch::nn::AnyModule norm) = 0;
};

class ConvImpl : public torch::nn::Module, public NormHolder {
 public:
  ConvImpl(int c1, int c2, int k = 1, int s = 1, int p = -1, int g = 1, int d = 1, bool act = true);
  // A kernel and stride of (height, width), padded "same" (CrossConv's 1xk and kx1 convolutions).
  ConvImpl(int c1, int c2, std::array<int, 2> k, std::array<int, 2> s, int g = 1, bool act = true);
  torch::Tensor forward(const torch::Tensor& x);

  // Folds the BatchNorm into the convolution (inference only); later forwards skip the BN.
  void fuse();
  bool fused() const { return fused_; }
  bool act() const { return activation_.kind != Activation::Kind::kIdentity; }
  const Activation& activation() const { return activation_; }
  int padding() const { return pad_[0]; }    // the height's, on both sides
  int padding_w() const { return pad_[1]; }  // the width's
  std::shared_ptr<torch::nn::Module> norm() const override { return bn_.ptr(); }
  void replace_norm(torch::nn::AnyModule norm) override;

  torch::nn::Conv2d conv{nullptr};

 private:
  void init(int c1, int c2, std::array<int, 2> k, std::array<int, 2> s, std::array<int, 2> p, int g,
            int d, bool act);
  torch::nn::AnyModule bn_;
  Activation activation_;
  std::array<int, 2> pad_{0, 0};
  bool fused_ = false;
};
TORCH_MODULE(Conv);

class BottleneckImpl : public torch::nn::Module {
 public:
  // k: cv1's and cv2's kernel sizes (YOLOv5's 1 and 3; Ultralytics' blocks use 3 and 3).
  BottleneckImpl(int c1, int c2, bool shortcut = true, int g = 1, double e = 0.5,
                 std::array<int, 2> k = {1, 3});
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
  // k: the Bottlenecks' kernel sizes (Ultralytics' C3k uses 3 and 3).
  C3Impl(int c1, int c2, int n = 1, bool shortcut = true, int g = 1, double e = 0.5,
         std::array<int, 2> k = {1, 3});
  torch::Tensor forward(const torch::Tensor& x);
  // Replaces the Bottlenecks (C3x, C3TR, C3SPP, C3Ghost); `m` then stays empty.
  void replace_m(std::shared_ptr<torch::nn::Module> module,
                 std::function<torch::Tensor(const torch::Tensor&)> run);
  Conv cv1{nullptr}, cv2{nullptr}, cv3{nullptr};
  torch::nn::Sequential m{nullptr};
  std::shared_ptr<torch::nn::Module> m_other;  // set by replace_m

 private:
  std::function<torch::Tensor(const torch::Tensor&)> run_m_;
};
TORCH_MODULE(C3);

// Spatial pyramid pooling, fast: three chained max-pools equal SPP(k=(5, 9, 13)). Ultralytics'
// form takes the number of pools n, a residual (shortcut, when c1 == c2) and a linear cv1
// (YOLO26's; YOLOv5, YOLOv8 and YOLO11 activate it).
class SPPFImpl : public torch::nn::Module {
 public:
  SPPFImpl(int c1, int c2, int k = 5, int n = 3, bool shortcut = false, bool cv1_act = true);
  torch::Tensor forward(const torch::Tensor& x);
  int pools() const { return n_; }
  bool residual() const { return add_; }
  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::MaxPool2d m{nullptr};

 private:
  int n_;
  bool add_;
};
TORCH_MODULE(SPPF);

// SPP: cv1, then max-pools of each kernel size side by side (YOLOv3-SPP, C3SPP).
class SPPImpl : public torch::nn::Module {
 public:
  SPPImpl(int c1, int c2, std::vector<int> k = {5, 9, 13});
  torch::Tensor forward(const torch::Tensor& x);
  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::ModuleList m{nullptr};  // MaxPool2d per kernel size
};
TORCH_MODULE(SPP);

// Space-to-depth (the four pixel phases side by side), then a Conv.
class FocusImpl : public torch::nn::Module {
 public:
  FocusImpl(int c1, int c2, int k = 1, int s = 1, int p = -1, int g = 1, bool act = true);
  torch::Tensor forward(const torch::Tensor& x);
  Conv conv{nullptr};
};
TORCH_MODULE(Focus);

// Half the channels from cv1, the other half from a cheap 5x5 depthwise cv2 on them.
class GhostConvImpl : public torch::nn::Module {
 public:
  GhostConvImpl(int c1, int c2, int k = 1, int s = 1, int g = 1, bool act = true);
  torch::Tensor forward(const torch::Tensor& x);
  Conv cv1{nullptr}, cv2{nullptr};
};
TORCH_MODULE(GhostConv);

class GhostBottleneckImpl : public torch::nn::Module {
 public:
  GhostBottleneckImpl(int c1, int c2, int k = 3, int s = 1);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Sequential conv{nullptr}, shortcut{nullptr};  // shortcut: empty = identity
};
TORCH_MODULE(GhostBottleneck);

// A 1xk then a kx1 convolution.
class CrossConvImpl : public torch::nn::Module {
 public:
  CrossConvImpl(int c1, int c2, int k = 3, int s = 1, int g = 1, double e = 1.0,
                bool shortcut = false);
  torch::Tensor forward(const torch::Tensor& x);
  bool shortcut() const { return add_; }  // adds the input to cv2's output
  Conv cv1{nullptr}, cv2{nullptr};

 private:
  bool add_;
};
TORCH_MODULE(CrossConv);

// CSP bottleneck (Cross Stage Partial Networks): its own BatchNorm and SiLU over the two paths.
class BottleneckCSPImpl : public torch::nn::Module, public NormHolder {
 public:
  BottleneckCSPImpl(int c1, int c2, int n = 1, bool shortcut = true, int g = 1, double e = 0.5);
  torch::Tensor forward(const torch::Tensor& x);
  // Its BatchNorm2d over the concatenated halves ("bn").
  std::shared_ptr<torch::nn::Module> norm() const override { return bn_.ptr(); }
  void replace_norm(torch::nn::AnyModule norm) override;
  Conv cv1{nullptr}, cv4{nullptr};
  torch::nn::Conv2d cv2{nullptr}, cv3{nullptr};
  torch::nn::Sequential m{nullptr};

 private:
  torch::nn::AnyModule bn_;
};
TORCH_MODULE(BottleneckCSP);

// Self-attention over the positions of a feature map (YOLOv5's TransformerLayer).
class TransformerLayerImpl : public torch::nn::Module {
 public:
  TransformerLayerImpl(int c, int num_heads);
  torch::Tensor forward(const torch::Tensor& x);  // x: (positions, batch, c)
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, fc1{nullptr}, fc2{nullptr};
  torch::nn::MultiheadAttention ma{nullptr};
};
TORCH_MODULE(TransformerLayer);

class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(int c1, int c2, int num_heads, int num_layers);
  torch::Tensor forward(const torch::Tensor& x);
  Conv conv{nullptr};                 // only when c1 != c2
  torch::nn::Linear linear{nullptr};  // learnt position embedding
  torch::nn::Sequential tr{nullptr};

 private:
  int c2_;
};
TORCH_MODULE(TransformerBlock);

// C3 whose `m` is something else: CrossConvs (C3x), a TransformerBlock (C3TR), an SPP (C3SPP) or
// GhostBottlenecks (C3Ghost). Built by the model YAML's module name.
C3 make_c3_variant(const std::string& module, int c1, int c2, int n, bool shortcut, int g, double e,
                   const std::vector<int>& spp_k);

// Folds spatial blocks of gain x gain into channels (Contract) or back (Expand).
torch::Tensor contract(const torch::Tensor& x, int gain);
torch::Tensor expand(const torch::Tensor& x, int gain);

// Applies `fn` to every Conv block in `module`'s tree.
void for_each_conv(torch::nn::Module& module, const std::function<void(ConvImpl&)>& fn);
// Applies `fn` to every block in `module`'s tree that holds a normalisation layer.
void for_each_norm_holder(torch::nn::Module& module, const std::function<void(NormHolder&)>& fn);

}  // namespace yolo

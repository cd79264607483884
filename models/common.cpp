#include "models/common.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "models/batch_norm_silu.h"

namespace yolo {

namespace {

int autopad(int k, int p, int d) {
  if (p >= 0) return p;
  if (d > 1) k = d * (k - 1) + 1;
  return k / 2;
}

thread_local Activation current_activation;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

}  // namespace

torch::Tensor Activation::operator()(const torch::Tensor& x) const {
  switch (kind) {
    case Kind::kIdentity:
      return x;
    case Kind::kSiLU:
      return torch::silu(x);
    case Kind::kReLU:
      return torch::relu(x);
    case Kind::kLeakyReLU:
      return torch::leaky_relu(x, alpha);
    case Kind::kReLU6:
      return torch::hardtanh(x, 0.0, 6.0);
    case Kind::kHardswish:
      return torch::hardswish(x);
    case Kind::kSigmoid:
      return torch::sigmoid(x);
    case Kind::kTanh:
      return torch::tanh(x);
    case Kind::kGELU:
      return torch::gelu(x);
    case Kind::kMish:
      return torch::mish(x);
    case Kind::kELU:
      return torch::elu(x, alpha);
  }
  return x;
}

namespace {

struct ActivationName {
  const char* name;
  Activation::Kind kind;
  double default_alpha;  // < 0: takes no parameter
};
constexpr ActivationName kActivations[] = {{"Identity", Activation::Kind::kIdentity, -1},
                                           {"SiLU", Activation::Kind::kSiLU, -1},
                                           {"ReLU", Activation::Kind::kReLU, -1},
                                           {"LeakyReLU", Activation::Kind::kLeakyReLU, 0.01},
                                           {"ReLU6", Activation::Kind::kReLU6, -1},
                                           {"Hardswish", Activation::Kind::kHardswish, -1},
                                           {"Sigmoid", Activation::Kind::kSigmoid, -1},
                                           {"Tanh", Activation::Kind::kTanh, -1},
                                           {"GELU", Activation::Kind::kGELU, -1},
                                           {"Mish", Activation::Kind::kMish, -1},
                                           {"ELU", Activation::Kind::kELU, 1.0}};

}  // namespace

std::string Activation::text() const {
  for (const auto& a : kActivations) {
    if (a.kind != kind) continue;
    std::string s = std::string("nn.") + a.name + "(";
    if (a.default_alpha >= 0) {
      std::ostringstream v;
      v << alpha;
      s += v.str();
    }
    return s + ")";
  }
  return "?";
}

Activation Activation::parse(const std::string& written) {
  std::string supported;
  for (const auto& a : kActivations)
    supported += std::string(supported.empty() ? "" : ", ") + "nn." + a.name + "()";
  const auto refuse = [&](const std::string& why) -> Activation {
    throw std::invalid_argument("'" + written + "' " + why + " (supported: " + supported +
                                "; LeakyReLU and ELU take a number)");
  };
  std::string t = trim(written);
  if (t.rfind("torch.", 0) == 0) t = t.substr(6);
  if (t.rfind("nn.", 0) == 0) t = t.substr(3);
  const size_t open = t.find('(');
  if (open == std::string::npos || t.back() != ')') return refuse("is not an activation module");
  const std::string name = trim(t.substr(0, open));
  const std::string args = t.substr(open + 1, t.size() - open - 2);
  const ActivationName* found = nullptr;
  for (const auto& a : kActivations) {
    if (name == a.name) found = &a;
  }
  if (!found) return refuse("is not an activation this builder knows");
  Activation act;
  act.kind = found->kind;
  act.alpha = std::max(found->default_alpha, 0.0);
  bool have_value = false;
  std::stringstream parts(args);
  for (std::string part; std::getline(parts, part, ',');) {
    part = trim(part);
    if (part.empty()) continue;
    std::string key, value = part;
    if (const size_t eq = part.find('='); eq != std::string::npos) {
      key = trim(part.substr(0, eq));
      value = trim(part.substr(eq + 1));
    }
    if (key == "inplace") {
      if (value != "True" && value != "False") return refuse("has inplace=" + value);
      continue;
    }
    const bool alpha_key = key.empty() || key == "negative_slope" || key == "alpha";
    if (found->default_alpha < 0 || !alpha_key || have_value) {
      return refuse("has an argument this builder cannot apply ('" + part + "')");
    }
    try {
      size_t used = 0;
      act.alpha = std::stod(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      return refuse("has a parameter that is not a number ('" + part + "')");
    }
    have_value = true;
  }
  return act;
}

DefaultActivation::DefaultActivation(const Activation& activation) : saved_(current_activation) {
  current_activation = activation;
}

DefaultActivation::~DefaultActivation() { current_activation = saved_; }

const Activation& DefaultActivation::current() { return current_activation; }

ConvImpl::ConvImpl(int c1, int c2, int k, int s, int p, int g, int d, bool act) {
  const int pad = autopad(k, p, d);
  init(c1, c2, {k, k}, {s, s}, {pad, pad}, g, d, act);
}

ConvImpl::ConvImpl(int c1, int c2, std::array<int, 2> k, std::array<int, 2> s, int g, bool act) {
  init(c1, c2, k, s, {k[0] / 2, k[1] / 2}, g, 1, act);
}

void ConvImpl::init(int c1, int c2, std::array<int, 2> k, std::array<int, 2> s,
                    std::array<int, 2> p, int g, int d, bool act) {
  pad_ = p;
  activation_ = act ? DefaultActivation::current() : Activation{Activation::Kind::kIdentity, 0};
  conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c2, {k[0], k[1]})
                                                       .stride({s[0], s[1]})
                                                       .padding({p[0], p[1]})
                                                       .groups(g)
                                                       .dilation(d)
                                                       .bias(false)));
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(c2).eps(kBnEps).momentum(kBnMomentum));
  bn_ = torch::nn::AnyModule(bn);
  register_module("bn", bn);
}

namespace {
// silu(norm(x)), as one kernel where batch_norm_silu applies.
torch::Tensor norm_then_silu(torch::nn::AnyModule& norm, const torch::Tensor& x) {
  auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(norm.ptr().get());
  if (bn && batch_norm_silu_applies(x, *bn)) return batch_norm_silu(x, *bn);
  return torch::silu(norm.forward(x));
}
}  // namespace

torch::Tensor ConvImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = conv->forward(x);
  if (fused_) return activation_(y);
  if (activation_.kind == Activation::Kind::kSiLU) return norm_then_silu(bn_, y);
  return activation_(bn_.forward(y));
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

BottleneckImpl::BottleneckImpl(int c1, int c2, bool shortcut, int g, double e,
                               std::array<int, 2> k) {
  const int c_ = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, k[0], 1));
  cv2 = register_module("cv2", Conv(c_, c2, k[1], 1, -1, g));
  add_ = shortcut && c1 == c2;
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = cv2->forward(cv1->forward(x));
  return add_ ? x + y : y;
}

C3Impl::C3Impl(int c1, int c2, int n, bool shortcut, int g, double e, std::array<int, 2> k) {
  const int c_ = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1));
  cv2 = register_module("cv2", Conv(c1, c_, 1, 1));
  cv3 = register_module("cv3", Conv(2 * c_, c2, 1));
  torch::nn::Sequential seq;
  for (int i = 0; i < n; ++i) seq->push_back(Bottleneck(c_, c_, shortcut, g, 1.0, k));
  m = register_module("m", seq);
}

torch::Tensor C3Impl::forward(const torch::Tensor& x) {
  const torch::Tensor a = cv1->forward(x);
  return cv3->forward(torch::cat({run_m_ ? run_m_(a) : m->forward(a), cv2->forward(x)}, 1));
}

void C3Impl::replace_m(std::shared_ptr<torch::nn::Module> module,
                       std::function<torch::Tensor(const torch::Tensor&)> run) {
  m_other = replace_module("m", std::move(module));
  run_m_ = std::move(run);
}

SPPImpl::SPPImpl(int c1, int c2, std::vector<int> k) {
  const int c_ = c1 / 2;
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1));
  cv2 = register_module("cv2", Conv(c_ * static_cast<int>(k.size() + 1), c2, 1, 1));
  m = register_module("m", torch::nn::ModuleList());
  for (int x : k) {
    m->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(x).stride(1).padding(x / 2)));
  }
}

torch::Tensor SPPImpl::forward(const torch::Tensor& x) {
  const torch::Tensor a = cv1->forward(x);
  std::vector<torch::Tensor> cat = {a};
  for (const auto& pool : *m) cat.push_back(pool->as<torch::nn::MaxPool2d>()->forward(a));
  return cv2->forward(torch::cat(cat, 1));
}

FocusImpl::FocusImpl(int c1, int c2, int k, int s, int p, int g, bool act) {
  conv = register_module("conv", Conv(c1 * 4, c2, k, s, p, g, 1, act));
}

torch::Tensor FocusImpl::forward(const torch::Tensor& x) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  const auto even = Slice(None, None, 2), odd = Slice(1, None, 2);
  return conv->forward(torch::cat({x.index({"...", even, even}), x.index({"...", odd, even}),
                                   x.index({"...", even, odd}), x.index({"...", odd, odd})},
                                  1));
}

GhostConvImpl::GhostConvImpl(int c1, int c2, int k, int s, int g, bool act) {
  const int c_ = c2 / 2;
  cv1 = register_module("cv1", Conv(c1, c_, k, s, -1, g, 1, act));
  cv2 = register_module("cv2", Conv(c_, c_, 5, 1, -1, c_, 1, act));
}

torch::Tensor GhostConvImpl::forward(const torch::Tensor& x) {
  const torch::Tensor y = cv1->forward(x);
  return torch::cat({y, cv2->forward(y)}, 1);
}

namespace {
// YOLOv5's DWConv: a Conv whose groups are gcd(c1, c2).
Conv dw_conv(int c1, int c2, int k, int s, bool act) {
  return Conv(c1, c2, k, s, -1, std::gcd(c1, c2), 1, act);
}
}  // namespace

GhostBottleneckImpl::GhostBottleneckImpl(int c1, int c2, int k, int s) {
  const int c_ = c2 / 2;
  conv = register_module("conv", torch::nn::Sequential());
  conv->push_back(GhostConv(c1, c_, 1, 1));
  // Position 1 is an identity (no parameters) unless the block downsamples; the names of the
  // parameters after it (conv.2.*) stay YOLOv5's either way.
  if (s == 2) {
    conv->push_back(dw_conv(c_, c_, k, s, false));
  } else {
    conv->push_back(torch::nn::Identity());
  }
  conv->push_back(GhostConv(c_, c2, 1, 1, 1, false));
  shortcut = register_module("shortcut", torch::nn::Sequential());
  if (s == 2) {
    shortcut->push_back(dw_conv(c1, c1, k, s, false));
    shortcut->push_back(Conv(c1, c2, 1, 1, -1, 1, 1, false));
  }
}

torch::Tensor GhostBottleneckImpl::forward(const torch::Tensor& x) {
  return conv->forward(x) + (shortcut->is_empty() ? x : shortcut->forward(x));
}

CrossConvImpl::CrossConvImpl(int c1, int c2, int k, int s, int g, double e, bool shortcut) {
  const int c_ = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, std::array<int, 2>{1, k}, std::array<int, 2>{1, s}));
  cv2 = register_module("cv2", Conv(c_, c2, std::array<int, 2>{k, 1}, std::array<int, 2>{s, 1}, g));
  add_ = shortcut && c1 == c2;
}

torch::Tensor CrossConvImpl::forward(const torch::Tensor& x) {
  const torch::Tensor y = cv2->forward(cv1->forward(x));
  return add_ ? x + y : y;
}

BottleneckCSPImpl::BottleneckCSPImpl(int c1, int c2, int n, bool shortcut, int g, double e) {
  const int c_ = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1));
  cv2 = register_module("cv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c_, 1).bias(false)));
  cv3 = register_module("cv3", torch::nn::Conv2d(torch::nn::Conv2dOptions(c_, c_, 1).bias(false)));
  cv4 = register_module("cv4", Conv(2 * c_, c2, 1, 1));
  bn_ = torch::nn::AnyModule(torch::nn::BatchNorm2d(
      torch::nn::BatchNorm2dOptions(2 * c_).eps(kBnEps).momentum(kBnMomentum)));
  register_module("bn", bn_.ptr());
  m = register_module("m", torch::nn::Sequential());
  for (int i = 0; i < n; ++i) m->push_back(Bottleneck(c_, c_, shortcut, g, 1.0));
}

torch::Tensor BottleneckCSPImpl::forward(const torch::Tensor& x) {
  const torch::Tensor y1 = cv3->forward(m->forward(cv1->forward(x)));
  const torch::Tensor y2 = cv2->forward(x);
  // Its own SiLU, whatever the model's Conv activation (as YOLOv5 builds it).
  return cv4->forward(norm_then_silu(bn_, torch::cat({y1, y2}, 1)));
}

void BottleneckCSPImpl::replace_norm(torch::nn::AnyModule norm) {
  bn_ = std::move(norm);
  replace_module("bn", bn_.ptr());
}

TransformerLayerImpl::TransformerLayerImpl(int c, int num_heads) {
  const auto linear = [c] { return torch::nn::Linear(torch::nn::LinearOptions(c, c).bias(false)); };
  q = register_module("q", linear());
  k = register_module("k", linear());
  v = register_module("v", linear());
  ma = register_module(
      "ma", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(c, num_heads)));
  fc1 = register_module("fc1", linear());
  fc2 = register_module("fc2", linear());
}

torch::Tensor TransformerLayerImpl::forward(const torch::Tensor& x) {
  const torch::Tensor a = std::get<0>(ma->forward(q->forward(x), k->forward(x), v->forward(x))) + x;
  return fc2->forward(fc1->forward(a)) + a;
}

TransformerBlockImpl::TransformerBlockImpl(int c1, int c2, int num_heads, int num_layers)
    : c2_(c2) {
  if (c1 != c2) conv = register_module("conv", Conv(c1, c2));
  linear = register_module("linear", torch::nn::Linear(c2, c2));
  tr = register_module("tr", torch::nn::Sequential());
  for (int i = 0; i < num_layers; ++i) tr->push_back(TransformerLayer(c2, num_heads));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& input) {
  const torch::Tensor x = conv ? conv->forward(input) : input;
  const int64_t b = x.size(0), h = x.size(2), w = x.size(3);
  const torch::Tensor p = x.flatten(2).permute({2, 0, 1});
  return tr->forward(p + linear->forward(p)).permute({1, 2, 0}).reshape({b, c2_, h, w});
}

C3 make_c3_variant(const std::string& module, int c1, int c2, int n, bool shortcut, int g, double e,
                   const std::vector<int>& spp_k) {
  const int c_ = static_cast<int>(c2 * e);
  if (module == "C3") return C3(c1, c2, n, shortcut, g, e);
  C3 c3(c1, c2, 0, shortcut, g, e);
  if (module == "C3x") {
    for (int i = 0; i < n; ++i) c3->m->push_back(CrossConv(c_, c_, 3, 1, g, 1.0, shortcut));
  } else if (module == "C3Ghost") {
    for (int i = 0; i < n; ++i) c3->m->push_back(GhostBottleneck(c_, c_));
  } else if (module == "C3TR") {
    if (c_ % 4 != 0) {
      throw std::invalid_argument("C3TR's hidden width " + std::to_string(c_) +
                                  " is not divisible by its 4 attention heads");
    }
    TransformerBlock block(c_, c_, 4, n);
    c3->replace_m(block.ptr(), [m = block.ptr()](const torch::Tensor& x) { return m->forward(x); });
  } else if (module == "C3SPP") {
    SPP spp(c_, c_, spp_k);
    c3->replace_m(spp.ptr(), [m = spp.ptr()](const torch::Tensor& x) { return m->forward(x); });
  } else {
    throw std::invalid_argument("no C3 variant named " + module);
  }
  return c3;
}

torch::Tensor contract(const torch::Tensor& x, int s) {
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.view({b, c, h / s, s, w / s, s})
      .permute({0, 3, 5, 1, 2, 4})
      .contiguous()
      .view({b, c * s * s, h / s, w / s});
}

torch::Tensor expand(const torch::Tensor& x, int s) {
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.view({b, s, s, c / (s * s), h, w})
      .permute({0, 3, 4, 1, 5, 2})
      .contiguous()
      .view({b, c / (s * s), h * s, w * s});
}

SPPFImpl::SPPFImpl(int c1, int c2, int k, int n, bool shortcut, bool cv1_act)
    : n_(n), add_(shortcut && c1 == c2) {
  const int c_ = c1 / 2;
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1, -1, 1, 1, cv1_act));
  cv2 = register_module("cv2", Conv(c_ * (n + 1), c2, 1, 1));
  m = register_module(
      "m", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(k).stride(1).padding(k / 2)));
}

torch::Tensor SPPFImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> y = {cv1->forward(x)};
  for (int i = 0; i < n_; ++i) y.push_back(m->forward(y.back()));
  const torch::Tensor out = cv2->forward(torch::cat(y, 1));
  return add_ ? out + x : out;
}

void for_each_conv(torch::nn::Module& module, const std::function<void(ConvImpl&)>& fn) {
  for (const auto& child : module.modules(/*include_self=*/true)) {
    if (auto* c = dynamic_cast<ConvImpl*>(child.get())) fn(*c);
  }
}

void for_each_norm_holder(torch::nn::Module& module, const std::function<void(NormHolder&)>& fn) {
  for (const auto& child : module.modules(/*include_self=*/true)) {
    if (auto* h = dynamic_cast<NormHolder*>(child.get())) fn(*h);
  }
}

}  // namespace yolo

#include "utils/export/export_graph.h"

#include <torch/torch.h>

#include <stdexcept>

#include "models/anchor_free_detect.h"
#include "models/common.h"
#include "models/csp_attention.h"
#include "models/yolo.h"

namespace yolo {

namespace {

torch::Tensor host_float(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU, torch::kFloat).contiguous();
}

ExportArray array(const torch::Tensor& t) {
  const torch::Tensor c = host_float(t);
  ExportArray a;
  a.dims = c.sizes().vec();
  a.values.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  return a;
}

class Lowering {
 public:
  explicit Lowering(DetectionModelImpl& model) : model_(model) {}

  ExportGraph run() {
    const ModelSpec& spec = model_.spec();
    std::vector<int> value_of_layer(spec.layers.size(), -1);
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      std::vector<int> in;
      for (int f : model_.layer_inputs(i)) in.push_back(f < 0 ? 0 : value_of_layer.at(f));
      const std::string prefix = "model." + std::to_string(i);
      const std::shared_ptr<torch::nn::Module> m = model_.model->ptr(i);
      if (auto d = std::dynamic_pointer_cast<DetectImpl>(m)) {
        head(*d, in);
        return std::move(g_);
      }
      if (auto d = std::dynamic_pointer_cast<AnchorFreeDetectImpl>(m)) {
        anchor_free_head(*d, in, prefix);
        return std::move(g_);
      }
      value_of_layer[i] =
          spec.layers[i].module == "Concat" ? concat(in) : module(m, single(in, prefix), prefix);
    }
    throw std::runtime_error("the model has no Detect layer to export");
  }

 private:
  int add(ExportOp op) {
    g_.ops.push_back(std::move(op));
    return static_cast<int>(g_.ops.size());
  }
  static int single(const std::vector<int>& in, const std::string& where) {
    if (in.size() != 1) throw std::runtime_error(where + ": expected one input");
    return in[0];
  }
  int concat(const std::vector<int>& in) {
    ExportOp op;
    op.kind = ExportOp::Kind::kConcat;
    op.inputs = in;
    return add(op);
  }

  static ExportAct act_of(const Activation& a, const std::string& prefix) {
    using K = Activation::Kind;
    switch (a.kind) {
      case K::kIdentity:
        return ExportAct::kNone;
      case K::kSiLU:
        return ExportAct::kSiLU;
      case K::kReLU:
        return ExportAct::kReLU;
      case K::kLeakyReLU:
        return ExportAct::kLeakyReLU;
      case K::kReLU6:
        return ExportAct::kReLU6;
      case K::kHardswish:
        return ExportAct::kHardswish;
      case K::kSigmoid:
        return ExportAct::kSigmoid;
      case K::kTanh:
        return ExportAct::kTanh;
      case K::kGELU:
        return ExportAct::kGELU;
      case K::kMish:
        return ExportAct::kMish;
      case K::kELU:
        return ExportAct::kELU;
    }
    throw std::runtime_error(prefix + ": activation " + a.text() + " cannot be exported");
  }

  int conv(const ConvImpl& c, int x, const std::string& prefix) {
    if (!c.fused()) throw std::runtime_error(prefix + ": the model must be fused before export");
    const int y = conv2d(*c.conv, c.conv->weight, c.conv->bias, x, prefix + ".conv", c.padding(),
                         c.padding_w());
    g_.ops.back().act = c.act() ? act_of(c.activation(), prefix) : ExportAct::kNone;
    g_.ops.back().alpha = c.activation().alpha;
    return y;
  }

  // A convolution of weight and bias with conv's geometry.
  int conv2d(const torch::nn::Conv2dImpl& conv, const torch::Tensor& weight,
             const torch::Tensor& bias, int x, const std::string& name, int64_t pad_h,
             int64_t pad_w) {
    const auto& o = conv.options;
    ExportOp op;
    op.kind = ExportOp::Kind::kConv;
    op.inputs = {x};
    op.name = name;
    op.weight = array(weight);
    op.bias = array(bias);
    op.kernel = (*o.kernel_size())[0], op.kernel_w = (*o.kernel_size())[1];
    op.stride = (*o.stride())[0], op.stride_w = (*o.stride())[1];
    op.pad = pad_h, op.pad_w = pad_w;
    op.dilation = (*o.dilation())[0];
    op.groups = o.groups();
    if ((*o.dilation())[1] != op.dilation) {
      throw std::runtime_error(name + ": only equal dilations export");
    }
    return add(op);
  }

  // Channels [begin, end) of x, and further ranges side by side.
  int slice(int x, std::vector<int64_t> ranges) {
    ExportOp op;
    op.kind = ExportOp::Kind::kSlice;
    op.inputs = {x};
    op.ranges = std::move(ranges);
    return add(op);
  }

  // Ultralytics' Attention: qkv's channels are per head (key_dim q, key_dim k, head_dim v); v's
  // channels, gathered, are both the attention's values and pe's input.
  int attention(AttentionImpl& a, int x, const std::string& prefix) {
    const int qkv = conv(*a.qkv, x, prefix + ".qkv");
    const int64_t nh = a.num_heads(), kd = a.key_dim(), hd = a.head_dim(), per = 2 * kd + hd;
    std::vector<int64_t> v_ranges;
    for (int64_t h = 0; h < nh; ++h) {
      v_ranges.insert(v_ranges.end(), {h * per + 2 * kd, (h + 1) * per});
    }
    const int v = slice(qkv, v_ranges);
    ExportOp op;
    op.kind = ExportOp::Kind::kAttention;
    op.inputs = {qkv, v};
    op.heads = nh, op.key_dim = kd, op.head_dim = hd;
    op.attn_scale = a.scale();
    const int mixed = add(op);
    const int y = add_values(mixed, conv(*a.pe, v, prefix + ".pe"));
    return conv(*a.proj, y, prefix + ".proj");
  }

  // C2f and C3k2: cv1's halves, each block on the newest value, cv2 over all of them.
  int c2f(C2fImpl& c, int x, const std::string& prefix) {
    const int y = conv(*c.cv1, x, prefix + ".cv1");
    const int64_t h = c.hidden();
    std::vector<int> parts = {slice(y, {0, h}), slice(y, {h, 2 * h})};
    for (size_t k = 0; k < c.m->size(); ++k) {
      parts.push_back(module(c.m->ptr(k), parts.back(), prefix + ".m." + std::to_string(k)));
    }
    return conv(*c.cv2, concat(parts), prefix + ".cv2");
  }

  int activation(ExportAct act, int x) {
    ExportOp op;
    op.kind = ExportOp::Kind::kAct;
    op.inputs = {x};
    op.act = act;
    return add(op);
  }

  int add_values(int a, int b) {
    ExportOp op;
    op.kind = ExportOp::Kind::kAdd;
    op.inputs = {a, b};
    return add(op);
  }

  int max_pool(const torch::nn::MaxPool2dOptions& po, int x, const std::string& prefix) {
    if (po.ceil_mode() || (*po.dilation())[0] != 1 || (*po.dilation())[1] != 1) {
      throw std::runtime_error(prefix + ": only MaxPool2d without ceil_mode or dilation exports");
    }
    ExportOp op;
    op.kind = ExportOp::Kind::kMaxPool;
    op.inputs = {x};
    op.kernel = (*po.kernel_size())[0], op.kernel_w = (*po.kernel_size())[1];
    op.stride = (*po.stride())[0], op.stride_w = (*po.stride())[1];
    op.pad = (*po.padding())[0], op.pad_w = (*po.padding())[1];
    return add(op);
  }

  // BottleneckCSP: its BatchNorm over cat(cv3, cv2) is folded into those two bias-free
  // convolutions (a per-channel affine of each one's output), then its own SiLU.
  int bottleneck_csp(BottleneckCSPImpl& b, int x, const std::string& prefix) {
    auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(b.norm());
    if (!bn) throw std::runtime_error(prefix + ".bn: only BatchNorm2d exports");
    torch::NoGradGuard no_grad;
    const torch::Tensor scale = bn->weight / torch::sqrt(bn->running_var + bn->options.eps());
    const torch::Tensor shift = bn->bias - bn->running_mean * scale;
    const int64_t c_ = b.cv3->options.out_channels();
    const auto folded = [&](const torch::nn::Conv2dImpl& c, int64_t from, int v,
                            const std::string& name) {
      const torch::Tensor s = scale.slice(0, from, from + c_);
      return conv2d(c, c.weight * s.view({-1, 1, 1, 1}), shift.slice(0, from, from + c_), v, name,
                    0, 0);
    };
    const int y1 =
        folded(*b.cv3, 0, module(b.m.ptr(), conv(*b.cv1, x, prefix + ".cv1"), prefix + ".m"),
               prefix + ".cv3");
    const int y2 = folded(*b.cv2, c_, x, prefix + ".cv2");
    return conv(*b.cv4, activation(ExportAct::kSiLU, concat({y1, y2})), prefix + ".cv4");
  }

  // One module of the tree on the value x; returns the value it produces.
  int module(const std::shared_ptr<torch::nn::Module>& m, int x, const std::string& prefix) {
    if (auto c = std::dynamic_pointer_cast<ConvImpl>(m)) return conv(*c, x, prefix);
    if (auto b = std::dynamic_pointer_cast<BottleneckImpl>(m)) {
      const int y = conv(*b->cv2, conv(*b->cv1, x, prefix + ".cv1"), prefix + ".cv2");
      return b->shortcut() ? add_values(x, y) : y;
    }
    if (auto c3 = std::dynamic_pointer_cast<C3Impl>(m)) {          // also C3x, C3SPP, C3Ghost
      const auto inner = c3->m_other ? c3->m_other : c3->m.ptr();  // C3SPP's SPP, C3TR's block
      const int a = module(inner, conv(*c3->cv1, x, prefix + ".cv1"), prefix + ".m");
      const int b = conv(*c3->cv2, x, prefix + ".cv2");
      return conv(*c3->cv3, concat({a, b}), prefix + ".cv3");
    }
    if (auto s = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(m)) {
      int y = x;
      for (size_t k = 0; k < s->size(); ++k) {
        y = module(s->ptr(k), y, prefix + "." + std::to_string(k));
      }
      return y;
    }
    if (std::dynamic_pointer_cast<torch::nn::IdentityImpl>(m)) return x;
    if (auto c = std::dynamic_pointer_cast<ChainImpl>(m)) {
      int y = x;
      size_t k = 0;
      for (const auto& child : c->children()) {
        y = module(child, y, prefix + "." + std::to_string(k++));
      }
      return y;
    }
    if (auto c = std::dynamic_pointer_cast<C2fImpl>(m)) return c2f(*c, x, prefix);
    if (auto c = std::dynamic_pointer_cast<C2PSAImpl>(m)) {
      const int y = conv(*c->cv1, x, prefix + ".cv1");
      const int64_t h = c->hidden();
      const int b = module(c->m.ptr(), slice(y, {h, 2 * h}), prefix + ".m");
      return conv(*c->cv2, concat({slice(y, {0, h}), b}), prefix + ".cv2");
    }
    if (auto p = std::dynamic_pointer_cast<PSABlockImpl>(m)) {
      const int a = attention(*p->attn, x, prefix + ".attn");
      const int y = p->shortcut() ? add_values(x, a) : a;
      const int f = module(p->ffn.ptr(), y, prefix + ".ffn");
      return p->shortcut() ? add_values(y, f) : f;
    }
    if (auto a = std::dynamic_pointer_cast<AttentionImpl>(m)) return attention(*a, x, prefix);
    if (auto c = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(m)) {  // the head's last 1x1s
      const auto& k = *c->options.kernel_size();
      if (!c->bias.defined() || k[0] != 1 || k[1] != 1) {
        throw std::runtime_error(prefix + ": only a 1x1 Conv2d with a bias exports");
      }
      return conv2d(*c, c->weight, c->bias, x, prefix, 0, 0);
    }
    if (auto sppf = std::dynamic_pointer_cast<SPPFImpl>(m)) {
      const int a = conv(*sppf->cv1, x, prefix + ".cv1");
      std::vector<int> cat = {a};
      for (int k = 0; k < sppf->pools(); ++k) {
        cat.push_back(max_pool(sppf->m->options, cat.back(), prefix));
      }
      const int y = conv(*sppf->cv2, concat(cat), prefix + ".cv2");
      return sppf->residual() ? add_values(x, y) : y;
    }
    if (auto spp = std::dynamic_pointer_cast<SPPImpl>(m)) {
      const int a = conv(*spp->cv1, x, prefix + ".cv1");
      std::vector<int> cat = {a};
      for (const auto& pool : *spp->m) {
        cat.push_back(max_pool(pool->as<torch::nn::MaxPool2d>()->options, a, prefix + ".m"));
      }
      return conv(*spp->cv2, concat(cat), prefix + ".cv2");
    }
    if (auto f = std::dynamic_pointer_cast<FocusImpl>(m)) {
      ExportOp op;
      op.kind = ExportOp::Kind::kSpaceToDepth;
      op.inputs = {x};
      return conv(*f->conv, add(op), prefix + ".conv");
    }
    if (auto gc = std::dynamic_pointer_cast<GhostConvImpl>(m)) {
      const int y = conv(*gc->cv1, x, prefix + ".cv1");
      return concat({y, conv(*gc->cv2, y, prefix + ".cv2")});
    }
    if (auto gb = std::dynamic_pointer_cast<GhostBottleneckImpl>(m)) {
      const int y = module(gb->conv.ptr(), x, prefix + ".conv");
      return add_values(module(gb->shortcut.ptr(), x, prefix + ".shortcut"), y);
    }
    if (auto cc = std::dynamic_pointer_cast<CrossConvImpl>(m)) {
      const int y = conv(*cc->cv2, conv(*cc->cv1, x, prefix + ".cv1"), prefix + ".cv2");
      return cc->shortcut() ? add_values(x, y) : y;
    }
    if (auto csp = std::dynamic_pointer_cast<BottleneckCSPImpl>(m)) {
      return bottleneck_csp(*csp, x, prefix);
    }
    if (auto mp = std::dynamic_pointer_cast<torch::nn::MaxPool2dImpl>(m)) {
      return max_pool(mp->options, x, prefix);
    }
    if (auto zp = std::dynamic_pointer_cast<torch::nn::ZeroPad2dImpl>(m)) {
      ExportOp op;
      op.kind = ExportOp::Kind::kPad;
      op.inputs = {x};
      const auto& p = *zp->options.padding();
      op.pads.assign(p.begin(), p.end());
      return add(op);
    }
    if (auto u = std::dynamic_pointer_cast<torch::nn::UpsampleImpl>(m)) {
      const auto& f = u->options.scale_factor();
      if (!f || f->empty() || (f->size() == 2 && (*f)[0] != (*f)[1])) {
        throw std::runtime_error(prefix + ": only Upsample by one scale factor exports");
      }
      ExportOp op;
      op.kind = ExportOp::Kind::kUpsample;
      op.inputs = {x};
      op.scale = (*f)[0];
      return add(op);
    }
    std::string what = m->name();
    if (std::dynamic_pointer_cast<TransformerBlockImpl>(m)) what = "C3TR's transformer block";
    throw std::runtime_error(prefix + ": " + what +
                             " cannot be exported yet (everything of YOLOv5's models/common.py "
                             "but C3TR, Contract and Expand can)");
  }

  void head(DetectImpl& d, const std::vector<int>& in) {
    ExportHead& h = g_.head;
    h.inputs = in;
    h.nc = d.nc;
    h.na = d.na;
    const torch::Tensor stride = host_float(d.stride);
    for (int i = 0; i < d.nl; ++i) {
      auto conv = d.m[i]->as<torch::nn::Conv2d>();
      h.weight.push_back(array(conv->weight));
      h.bias.push_back(array(conv->bias));
      h.stride.push_back(stride[i].item<double>());
    }
    h.anchors = array(host_float(d.anchors) * stride.view({-1, 1, 1}));
  }

  void anchor_free_head(AnchorFreeDetectImpl& d, const std::vector<int>& in,
                        const std::string& prefix) {
    ExportHead& h = g_.head;
    h.anchor_free = true;
    h.inputs = in;
    h.nc = d.nc;
    h.na = 1;
    h.reg_max = d.reg_max;
    if (d.dfl) h.dfl_bins = array(d.dfl->conv->weight.view({-1}));
    h.end2end = d.selected() == AnchorFreeDetectImpl::Heads::kOne2One;
    const std::string branch = h.end2end ? ".one2one_" : ".";
    const torch::Tensor stride = host_float(d.stride);
    for (int i = 0; i < d.nl; ++i) {
      const std::string level = "." + std::to_string(i);
      h.box.push_back(module((h.end2end ? d.one2one_cv2 : d.cv2)[i], in.at(i),
                             prefix + branch + "cv2" + level));
      h.cls.push_back(module((h.end2end ? d.one2one_cv3 : d.cv3)[i], in.at(i),
                             prefix + branch + "cv3" + level));
      h.stride.push_back(stride[i].item<double>());
    }
  }

  DetectionModelImpl& model_;
  ExportGraph g_;
};

}  // namespace

int64_t ExportGraph::rows(int64_t h, int64_t w) const {
  int64_t n = 0;
  for (double s : head.stride) {
    n += (h / static_cast<int64_t>(s)) * (w / static_cast<int64_t>(s));
  }
  return n * head.na;
}

ExportGraph lower_model(DetectionModelImpl& model) { return Lowering(model).run(); }

}  // namespace yolo

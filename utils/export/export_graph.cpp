#include "utils/export/export_graph.h"

#include <torch/torch.h>

#include <stdexcept>

#include "models/common.h"
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

  int conv(const ConvImpl& c, int x, const std::string& prefix) {
    if (!c.fused()) throw std::runtime_error(prefix + ": the model must be fused before export");
    const auto& o = c.conv->options;
    ExportOp op;
    op.kind = ExportOp::Kind::kConv;
    op.inputs = {x};
    op.name = prefix + ".conv";
    op.weight = array(c.conv->weight);
    op.bias = array(c.conv->bias);
    op.kernel = (*o.kernel_size())[0];
    op.stride = (*o.stride())[0];
    op.dilation = (*o.dilation())[0];
    op.groups = o.groups();
    op.pad = c.padding();
    op.silu = c.act();
    if (op.silu && c.activation().kind != Activation::Kind::kSiLU) {
      throw std::runtime_error(prefix + ": activation " + c.activation().text() +
                               " cannot be exported yet (SiLU models can)");
    }
    if ((*o.kernel_size())[1] != op.kernel || (*o.stride())[1] != op.stride) {
      throw std::runtime_error(prefix + ": only square kernels and strides export");
    }
    return add(op);
  }

  // One module of the tree on the value x; returns the value it produces.
  int module(const std::shared_ptr<torch::nn::Module>& m, int x, const std::string& prefix) {
    if (auto c = std::dynamic_pointer_cast<ConvImpl>(m)) return conv(*c, x, prefix);
    if (auto b = std::dynamic_pointer_cast<BottleneckImpl>(m)) {
      const int y = conv(*b->cv2, conv(*b->cv1, x, prefix + ".cv1"), prefix + ".cv2");
      if (!b->shortcut()) return y;
      ExportOp op;
      op.kind = ExportOp::Kind::kAdd;
      op.inputs = {x, y};
      return add(op);
    }
    if (auto c3 = std::dynamic_pointer_cast<C3Impl>(m)) {
      const int a = module(c3->m.ptr(), conv(*c3->cv1, x, prefix + ".cv1"), prefix + ".m");
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
    if (auto sppf = std::dynamic_pointer_cast<SPPFImpl>(m)) {
      const auto& po = sppf->m->options;
      ExportOp pool;
      pool.kind = ExportOp::Kind::kMaxPool;
      pool.kernel = (*po.kernel_size())[0];
      pool.stride = (*po.stride())[0];
      pool.pad = (*po.padding())[0];
      const int a = conv(*sppf->cv1, x, prefix + ".cv1");
      std::vector<int> cat = {a};
      for (int k = 0; k < 3; ++k) {
        pool.inputs = {cat.back()};
        cat.push_back(add(pool));
      }
      return conv(*sppf->cv2, concat(cat), prefix + ".cv2");
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
    throw std::runtime_error(prefix + ": module " + m->name() + " cannot be exported");
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

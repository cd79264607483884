#include "models/yolo.h"

#include <torch/torch.h>

#include <cmath>
#include <iomanip>
#include <sstream>

#include "models/common.h"
#include "utils/log.h"

namespace yolo {

namespace {

int make_divisible(double x, int divisor) {
  return static_cast<int>(std::ceil(x / divisor)) * divisor;
}

// Python's round() (half to even), which parse_model uses for depth scaling.
int py_round(double x) { return static_cast<int>(std::nearbyint(x)); }

class ArgReader {
 public:
  ArgReader(const LayerSpec& L, const ModelSpec& spec) : L_(L), spec_(spec) {}
  std::string where() const { return spec_.source + ":" + std::to_string(L_.line); }
  void expect_count(size_t lo, size_t hi) const {
    if (L_.args.size() < lo || L_.args.size() > hi) {
      std::ostringstream m;
      m << where() << ": " << L_.module << " takes " << lo;
      if (hi != lo) m << " to " << hi;
      m << " arguments, got " << L_.args.size();
      throw std::runtime_error(m.str());
    }
  }
  bool has(size_t i) const { return i < L_.args.size() && L_.args[i] != "None"; }
  int integer(size_t i, int nc) const {
    const std::string& s = L_.args.at(i);
    if (s == "nc") return nc;
    try {
      size_t used = 0;
      const int v = std::stoi(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
    throw std::runtime_error(where() + ": argument " + std::to_string(i + 1) + " of " + L_.module +
                             " must be an integer, got '" + s + "'");
  }
  double number(size_t i) const {
    try {
      return std::stod(L_.args.at(i));
    } catch (const std::exception&) {
      throw std::runtime_error(where() + ": argument " + std::to_string(i + 1) + " of " +
                               L_.module + " must be a number, got '" + L_.args.at(i) + "'");
    }
  }
  bool boolean(size_t i) const {
    const std::string& s = L_.args.at(i);
    if (s == "True" || s == "true") return true;
    if (s == "False" || s == "false") return false;
    throw std::runtime_error(where() + ": argument " + std::to_string(i + 1) + " of " + L_.module +
                             " must be True or False, got '" + s + "'");
  }

 private:
  const LayerSpec& L_;
  const ModelSpec& spec_;
};

std::string join_args(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

int64_t count_params(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

DetectionModelImpl::DetectionModelImpl(ModelSpec spec, int nc_override, int in_ch)
    : spec_(std::move(spec)) {
  if (nc_override > 0 && nc_override != spec_.nc) {
    log_info("Overriding model.yaml nc=" + std::to_string(spec_.nc) +
             " with nc=" + std::to_string(nc_override));
    spec_.nc = nc_override;
  }
  const int nc = spec_.nc;
  const int na = static_cast<int>(spec_.anchors[0].size() / 2);
  const int no = na * (nc + 5);
  const double gd = spec_.depth_multiple, gw = spec_.width_multiple;

  model = register_module("model", torch::nn::ModuleList());
  std::vector<int> out_ch;
  keep_.assign(spec_.layers.size(), false);
  std::ostringstream table;
  table << std::right << std::setw(3) << "" << std::setw(18) << "from" << std::setw(3) << "n"
        << std::setw(10) << "params"
        << "  " << std::left << std::setw(40) << "module"
        << "arguments\n";

  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    const LayerSpec& L = spec_.layers[i];
    const ArgReader a(L, spec_);
    Layer layer;
    for (int f : L.from) {
      const int abs = f < 0 ? static_cast<int>(i) + f : f;
      if (abs >= static_cast<int>(i) || abs < -1 || (abs == -1 && f != -1)) {
        throw std::runtime_error(a.where() + ": 'from' index " + std::to_string(f) +
                                 " does not name an earlier layer");
      }
      layer.from.push_back(abs);
      if (abs >= 0 && !(f == -1)) keep_[abs] = true;
    }
    auto ch_of = [&](int abs) { return abs < 0 ? in_ch : out_ch[abs]; };
    auto single_input = [&]() {
      if (layer.from.size() != 1) {
        throw std::runtime_error(a.where() + ": " + L.module + " takes exactly one input");
      }
      return ch_of(layer.from[0]);
    };
    const int n = L.number > 1 ? std::max(py_round(L.number * gd), 1) : L.number;
    int c2 = 0;
    std::shared_ptr<torch::nn::Module> mod;
    std::vector<std::string> shown_args;

    if (L.module == "Conv" || L.module == "Bottleneck" || L.module == "C3" || L.module == "SPPF") {
      const int c1 = single_input();
      if (L.args.empty()) throw std::runtime_error(a.where() + ": " + L.module + " needs c2");
      c2 = a.integer(0, nc);
      if (c2 != no) c2 = make_divisible(c2 * gw, 8);
      shown_args = {std::to_string(c1), std::to_string(c2)};
      for (size_t k = 1; k < L.args.size(); ++k) shown_args.push_back(L.args[k]);
      if (L.module == "C3") {
        a.expect_count(1, 4);
        shown_args.insert(shown_args.begin() + 2, std::to_string(n));
        C3 c3(c1, c2, n, a.has(1) ? a.boolean(1) : true, a.has(2) ? a.integer(2, nc) : 1,
              a.has(3) ? a.number(3) : 0.5);
        mod = c3.ptr();
        layer.run = [p = c3.ptr()](const std::vector<torch::Tensor>& x) {
          return p->forward(x[0]);
        };
      } else {
        // Conv and Bottleneck repeat as an nn.Sequential when n > 1 (YOLOv5 parse_model).
        torch::nn::Sequential seq{nullptr};
        auto repeat = [&](auto make) {
          for (int r = 0; r < n; ++r) {
            auto m = make(r == 0 ? c1 : c2);
            if (n == 1) {
              mod = m.ptr();
              layer.run = [p = m.ptr()](const std::vector<torch::Tensor>& x) {
                return p->forward(x[0]);
              };
            } else {
              if (!seq) seq = torch::nn::Sequential();
              seq->push_back(m);
            }
          }
        };
        if (L.module == "Conv") {
          a.expect_count(1, 7);
          const int k = a.has(1) ? a.integer(1, nc) : 1, s = a.has(2) ? a.integer(2, nc) : 1;
          const int p = a.has(3) ? a.integer(3, nc) : -1, g = a.has(4) ? a.integer(4, nc) : 1;
          const int d = a.has(5) ? a.integer(5, nc) : 1;
          const bool act = a.has(6) ? a.boolean(6) : true;
          repeat([&](int cin) { return Conv(cin, c2, k, s, p, g, d, act); });
        } else if (L.module == "Bottleneck") {
          a.expect_count(1, 4);
          const bool sc = a.has(1) ? a.boolean(1) : true;
          const int g = a.has(2) ? a.integer(2, nc) : 1;
          const double e = a.has(3) ? a.number(3) : 0.5;
          repeat([&](int cin) { return Bottleneck(cin, c2, sc, g, e); });
        } else {  // SPPF
          a.expect_count(1, 2);
          if (n != 1) {
            throw std::runtime_error(a.where() + ": SPPF cannot repeat (number must be 1)");
          }
          SPPF sp(c1, c2, a.has(1) ? a.integer(1, nc) : 5);
          mod = sp.ptr();
          layer.run = [p = sp.ptr()](const std::vector<torch::Tensor>& x) {
            return p->forward(x[0]);
          };
        }
        if (seq) {
          mod = seq.ptr();
          layer.run = [p = seq.ptr()](const std::vector<torch::Tensor>& x) {
            return p->forward(x[0]);
          };
        }
      }
    } else if (L.module == "Concat") {
      a.expect_count(0, 1);
      const int dim = a.has(0) ? a.integer(0, nc) : 1;
      if (dim != 1) throw std::runtime_error(a.where() + ": Concat supports dimension 1 only");
      for (int f : layer.from) c2 += ch_of(f);
      shown_args = {std::to_string(dim)};
      mod = std::make_shared<torch::nn::Module>("Concat");
      layer.run = [](const std::vector<torch::Tensor>& x) { return torch::cat(x, 1); };
    } else if (L.module == "nn.Upsample") {
      a.expect_count(2, 3);
      c2 = single_input();
      if (a.has(0)) throw std::runtime_error(a.where() + ": nn.Upsample supports size=None only");
      const double scale = a.number(1);
      std::string mode = L.args.size() > 2 ? L.args[2] : "nearest";
      if (mode != "nearest") {
        throw std::runtime_error(a.where() + ": nn.Upsample mode '" + mode +
                                 "' is not supported (use 'nearest')");
      }
      torch::nn::Upsample up(torch::nn::UpsampleOptions()
                                 .scale_factor(std::vector<double>{scale, scale})
                                 .mode(torch::kNearest));
      mod = up.ptr();
      layer.run = [p = up.ptr()](const std::vector<torch::Tensor>& x) { return p->forward(x[0]); };
      shown_args = L.args;
    } else if (L.module == "Detect") {
      a.expect_count(2, 2);
      if (i + 1 != spec_.layers.size()) {
        throw std::runtime_error(a.where() + ": Detect must be the last layer");
      }
      if (L.args[1] != "anchors") {
        throw std::runtime_error(a.where() + ": Detect's second argument must be 'anchors'");
      }
      std::vector<int> chs;
      for (int f : layer.from) chs.push_back(ch_of(f));
      if (chs.size() != spec_.anchors.size()) {
        throw std::runtime_error(a.where() + ": Detect has " + std::to_string(chs.size()) +
                                 " inputs but 'anchors' has " +
                                 std::to_string(spec_.anchors.size()) + " levels");
      }
      detect_ = Detect(a.integer(0, nc), spec_.anchors, chs);
      mod = detect_.ptr();
      layer.is_detect = true;
      shown_args = {std::to_string(nc), "anchors"};
    } else {
      throw std::runtime_error(a.where() + ": unknown module '" + L.module +
                               "' (supported: Conv, Bottleneck, C3, SPPF, Concat, nn.Upsample, "
                               "Detect)");
    }
    model->push_back(mod);
    layers_.push_back(std::move(layer));
    out_ch.push_back(c2);

    std::string from_s;
    if (L.from.size() == 1) {
      from_s = std::to_string(L.from[0]);
    } else {
      from_s = "[";
      for (size_t k = 0; k < L.from.size(); ++k)
        from_s += (k ? ", " : "") + std::to_string(L.from[k]);
      from_s += "]";
    }
    table << std::right << std::setw(3) << i << std::setw(18) << from_s << std::setw(3) << n
          << std::setw(10) << count_params(*mod) << "  " << std::left << std::setw(40)
          << ("models.common." + L.module) << join_args(shown_args) << "\n";
  }
  if (!detect_) throw std::runtime_error(spec_.source + ": the model has no Detect layer");
  table_ = table.str();

  // Strides from a forward pass (eval mode, so BatchNorm statistics stay untouched).
  {
    torch::NoGradGuard no_grad;
    const int s = 256;
    eval();
    const auto raw = forward_raw(torch::zeros({1, in_ch, s, s}));
    train();
    std::vector<float> strides;
    for (const auto& r : raw) strides.push_back(static_cast<float>(s) / r.size(2));
    detect_->stride = torch::tensor(strides);
    // YOLOv5's check_anchor_order: anchor areas must grow with stride.
    const torch::Tensor area = detect_->anchors.prod(-1).mean(-1).view(-1);
    const double da = (area[-1] - area[0]).item<double>();
    const double ds = strides.back() - strides.front();
    if (da != 0 && (da > 0) != (ds > 0)) {
      log_info("AutoAnchor: Reversing anchor order");
      detect_->anchors.copy_(detect_->anchors.flip(0));
    }
    detect_->anchors.div_(detect_->stride.view({-1, 1, 1}));
  }
  detect_->initialize_biases();
}

std::vector<torch::Tensor> DetectionModelImpl::forward_raw(const torch::Tensor& input) {
  std::vector<torch::Tensor> saved(layers_.size());
  torch::Tensor x = input;
  std::vector<torch::Tensor> args;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    args.clear();
    for (int f : L.from) {
      args.push_back(f < 0 ? input : (f == static_cast<int>(i) - 1 ? x : saved[f]));
    }
    if (L.is_detect) return detect_->forward(std::move(args));
    x = L.run(args);
    if (keep_[i]) saved[i] = x;
  }
  TORCH_CHECK(false, "model has no Detect layer");
}

ModelOutput DetectionModelImpl::forward(const torch::Tensor& x) {
  ModelOutput out;
  out.raw = forward_raw(x);
  if (!is_training()) out.pred = detect_->decode(out.raw);
  return out;
}

void DetectionModelImpl::fuse() {
  for_each_conv(*this, [](ConvImpl& c) { c.fuse(); });
}

std::vector<int> DetectionModelImpl::strides() const {
  std::vector<int> s;
  for (int i = 0; i < detect_->nl; ++i)
    s.push_back(static_cast<int>(detect_->stride[i].item<float>()));
  return s;
}

int DetectionModelImpl::max_stride() const {
  const auto s = strides();
  return std::max(32, *std::max_element(s.begin(), s.end()));
}

int64_t DetectionModelImpl::num_parameters() const { return count_params(*this); }

std::string DetectionModelImpl::summary() const {
  std::ostringstream s;
  s << table_ << "Model summary: " << layers_.size() << " layers, " << num_parameters()
    << " parameters, " << named_buffers().size() + named_parameters().size()
    << " state_dict entries, strides";
  for (int st : strides()) s << " " << st;
  return s.str();
}

DetectionModel build_model(const std::string& cfg_path, int nc) {
  return DetectionModel(parse_model_spec_file(cfg_path), nc);
}

}  // namespace yolo

#include "models/yolo.h"

#include <torch/torch.h>

#include <cmath>
#include <iomanip>
#include <numeric>
#include <set>
#include <sstream>

#include "models/anchor_free_detect.h"
#include "models/common.h"
#include "models/csp_attention.h"
#include "utils/core/format.h"
#include "utils/core/log.h"

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
  // "[5, 9, 13]" or "(5, 9, 13)": SPP's kernel sizes.
  std::vector<int> int_list(size_t i, bool allow_zero = false) const {
    const std::string& s = L_.args.at(i);
    const auto bad = [&]() -> std::runtime_error {
      return std::runtime_error(where() + ": argument " + std::to_string(i + 1) + " of " +
                                L_.module + " must be a list of integers, got '" + s + "'");
    };
    if (s.size() < 2 ||
        !((s.front() == '[' && s.back() == ']') || (s.front() == '(' && s.back() == ')'))) {
      throw bad();
    }
    std::vector<int> out;
    std::stringstream parts(s.substr(1, s.size() - 2));
    for (std::string part; std::getline(parts, part, ',');) {
      const size_t a = part.find_first_not_of(' '), b = part.find_last_not_of(' ');
      if (a == std::string::npos) continue;
      try {
        size_t used = 0;
        const std::string t = part.substr(a, b - a + 1);
        const int v = std::stoi(t, &used);
        if (used != t.size() || v < (allow_zero ? 0 : 1)) throw bad();
        out.push_back(v);
      } catch (const std::exception&) {
        throw bad();
      }
    }
    if (out.empty()) throw bad();
    return out;
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

using RunFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// What parsing one layer of the YAML produced.
struct ParsedLayer {
  std::vector<int> from;     // absolute indices; -1 = model input
  std::vector<int> from_ch;  // their channel counts
  RunFn run;
  std::shared_ptr<torch::nn::Module> mod;
  std::shared_ptr<DetectHead> head;  // the Detect layer's
  Detect detect{nullptr};            // YOLOv5's head
  int c2 = 0;                        // output channels
  std::vector<std::string> shown_args;

  int single_input(const ArgReader& a, const std::string& module) const {
    if (from.size() != 1)
      throw std::runtime_error(a.where() + ": " + module + " takes exactly one input");
    return from_ch[0];
  }
  template <typename Holder>
  void use(const Holder& m) {  // a module that runs on the layer's one input
    mod = m.ptr();
    run = [ptr = m.ptr()](const std::vector<torch::Tensor>& x) { return ptr->forward(x[0]); };
  }
};

// Scaling and class counts that every layer's arguments are read with.
struct ModelScale {
  int nc, no;  // no: YOLOv5's Detect outputs (not width-scaled); -1 for anchor-free models
  double gw;
  double max_channels;  // 0: no cap
  std::string scale;    // the scale letter, "" without `scales:`
};

// Conv and Bottleneck repeat as an nn.Sequential when n > 1 (YOLOv5 parse_model).
template <typename Make>
void repeat_module(ParsedLayer& p, int n, int c1, Make make) {
  if (n == 1) {
    p.use(make(c1));
    return;
  }
  torch::nn::Sequential seq;
  for (int r = 0; r < n; ++r) seq->push_back(make(r == 0 ? c1 : p.c2));
  p.use(seq);
}

// The modules whose first argument is c2, scaled by the width multiple (YOLOv5 parse_model's
// first set); the C3 family and BottleneckCSP take the repeats as their own n.
const std::set<std::string>& block_modules() {
  static const std::set<std::string> k = {
      "Conv", "GhostConv", "Bottleneck", "GhostBottleneck", "SPP",
      "SPPF", "DWConv",    "Focus",      "CrossConv",       "BottleneckCSP",
      "C3",   "C3TR",      "C3SPP",      "C3Ghost",         "C3x",
      "C2f",  "C3k2",      "C2PSA"};
  return k;
}
bool repeats_inside(const std::string& module) {
  return module == "BottleneckCSP" || module == "C3" || module == "C3TR" || module == "C3Ghost" ||
         module == "C3x";
}

// Ultralytics' C2f [c2, shortcut=False, g, e], C3k2 [c2, c3k=False, e, attn=False, g,
// shortcut=True] (c3k forced on at scales m, l and x) and C2PSA [c2, e]: n goes inside, as the
// third argument.
void parse_csp_block(ParsedLayer& p, const LayerSpec& L, const ArgReader& a, int n,
                     const ModelScale& m) {
  const int c1 = p.from_ch[0], c2 = p.c2;
  const std::string& mod = L.module;
  const auto opt_int = [&](size_t i, int fallback) {
    return a.has(i) ? a.integer(i, m.nc) : fallback;
  };
  const auto opt_bool = [&](size_t i, bool fallback) { return a.has(i) ? a.boolean(i) : fallback; };
  const auto opt_num = [&](size_t i, double fallback) { return a.has(i) ? a.number(i) : fallback; };
  p.shown_args.insert(p.shown_args.begin() + 2, std::to_string(n));
  try {
    if (mod == "C2f") {
      a.expect_count(1, 4);
      p.use(C2f(c1, c2, n, opt_bool(1, false), opt_int(2, 1), opt_num(3, 0.5)));
    } else if (mod == "C3k2") {
      a.expect_count(1, 6);
      bool c3k = opt_bool(1, false);
      if (m.scale == "m" || m.scale == "l" || m.scale == "x") {
        c3k = true;
        if (p.shown_args.size() > 3) {
          p.shown_args[3] = "True";
        } else {
          p.shown_args.push_back("True");
        }
      }
      p.use(make_c3k2(c1, c2, n, c3k, opt_num(2, 0.5), opt_bool(3, false), opt_int(4, 1),
                      opt_bool(5, true)));
    } else {
      a.expect_count(1, 2);
      p.use(C2PSA(c1, c2, n, opt_num(1, 0.5)));
    }
  } catch (const std::invalid_argument& err) {
    throw std::runtime_error(a.where() + ": " + err.what());
  }
}

void parse_block(ParsedLayer& p, const LayerSpec& L, const ArgReader& a, int n,
                 const ModelScale& m) {
  const int nc = m.nc;
  const std::string& mod = L.module;
  const int c1 = p.single_input(a, mod);
  if (L.args.empty()) throw std::runtime_error(a.where() + ": " + mod + " needs c2");
  int c2 = a.integer(0, nc);
  if (m.max_channels > 0) c2 = static_cast<int>(std::min<double>(c2, m.max_channels));
  if (c2 != m.no) c2 = make_divisible(c2 * m.gw, 8);
  p.c2 = c2;
  p.shown_args = {std::to_string(c1), std::to_string(c2)};
  for (size_t k = 1; k < L.args.size(); ++k) p.shown_args.push_back(L.args[k]);
  const auto opt_int = [&](size_t i, int fallback) {
    return a.has(i) ? a.integer(i, nc) : fallback;
  };
  const auto opt_bool = [&](size_t i, bool fallback) { return a.has(i) ? a.boolean(i) : fallback; };
  const auto opt_num = [&](size_t i, double fallback) { return a.has(i) ? a.number(i) : fallback; };
  if (mod == "C2f" || mod == "C3k2" || mod == "C2PSA") {
    parse_csp_block(p, L, a, n, m);
  } else if (repeats_inside(mod)) {
    a.expect_count(1, 4);
    p.shown_args.insert(p.shown_args.begin() + 2, std::to_string(n));
    const bool shortcut = opt_bool(1, true);
    const int g = opt_int(2, 1);
    const double e = opt_num(3, 0.5);
    try {
      if (mod == "BottleneckCSP") {
        p.use(BottleneckCSP(c1, c2, n, shortcut, g, e));
      } else {
        p.use(make_c3_variant(mod, c1, c2, n, shortcut, g, e, {}));
      }
    } catch (const std::invalid_argument& err) {
      throw std::runtime_error(a.where() + ": " + err.what());
    }
  } else if (mod == "Conv") {
    a.expect_count(1, 7);
    const int k = opt_int(1, 1), s = opt_int(2, 1), pad = opt_int(3, -1), g = opt_int(4, 1);
    const int d = opt_int(5, 1);
    const bool act = opt_bool(6, true);
    repeat_module(p, n, c1, [&](int cin) { return Conv(cin, c2, k, s, pad, g, d, act); });
  } else if (mod == "DWConv") {
    a.expect_count(1, 5);
    const int k = opt_int(1, 1), s = opt_int(2, 1), d = opt_int(3, 1);
    const bool act = opt_bool(4, true);
    repeat_module(p, n, c1,
                  [&](int cin) { return Conv(cin, c2, k, s, -1, std::gcd(cin, c2), d, act); });
  } else if (mod == "GhostConv") {
    a.expect_count(1, 5);
    const int k = opt_int(1, 1), s = opt_int(2, 1), g = opt_int(3, 1);
    const bool act = opt_bool(4, true);
    repeat_module(p, n, c1, [&](int cin) { return GhostConv(cin, c2, k, s, g, act); });
  } else if (mod == "GhostBottleneck") {
    a.expect_count(1, 3);
    const int k = opt_int(1, 3), s = opt_int(2, 1);
    if (s != 1 && s != 2) throw std::runtime_error(a.where() + ": GhostBottleneck's s is 1 or 2");
    repeat_module(p, n, c1, [&](int cin) { return GhostBottleneck(cin, c2, k, s); });
  } else if (mod == "Bottleneck") {
    a.expect_count(1, 4);
    const bool sc = opt_bool(1, true);
    const int g = opt_int(2, 1);
    const double e = opt_num(3, 0.5);
    repeat_module(p, n, c1, [&](int cin) { return Bottleneck(cin, c2, sc, g, e); });
  } else if (mod == "CrossConv") {
    a.expect_count(1, 6);
    const int k = opt_int(1, 3), s = opt_int(2, 1), g = opt_int(3, 1);
    const double e = opt_num(4, 1.0);
    const bool sc = opt_bool(5, false);
    repeat_module(p, n, c1, [&](int cin) { return CrossConv(cin, c2, k, s, g, e, sc); });
  } else if (mod == "Focus") {
    a.expect_count(1, 6);
    const int k = opt_int(1, 1), s = opt_int(2, 1), pad = opt_int(3, -1), g = opt_int(4, 1);
    const bool act = opt_bool(5, true);
    repeat_module(p, n, c1, [&](int cin) { return Focus(cin, c2, k, s, pad, g, act); });
  } else if (mod == "SPP") {
    a.expect_count(1, 2);
    const std::vector<int> k = a.has(1) ? a.int_list(1) : std::vector<int>{5, 9, 13};
    repeat_module(p, n, c1, [&](int cin) { return SPP(cin, c2, k); });
  } else if (mod == "C3SPP") {
    // Not in YOLOv5's repeats-inside set: its own n (argument 3) only sizes Bottlenecks that the
    // SPP replaces.
    a.expect_count(1, 6);
    const std::vector<int> k = a.has(1) ? a.int_list(1) : std::vector<int>{5, 9, 13};
    const bool sc = opt_bool(3, true);
    const int g = opt_int(4, 1);
    const double e = opt_num(5, 0.5);
    repeat_module(p, n, c1,
                  [&](int cin) { return make_c3_variant("C3SPP", cin, c2, 1, sc, g, e, k); });
  } else {  // SPPF [c2, k=5, n=3, shortcut=False]
    a.expect_count(1, 4);
    if (n != 1) throw std::runtime_error(a.where() + ": SPPF cannot repeat (number must be 1)");
    const int pools = opt_int(2, 3);
    if (pools < 1) throw std::runtime_error(a.where() + ": SPPF needs at least one pool");
    // Rows of one or two arguments (YOLOv5, YOLOv8, YOLO11) activate cv1; longer rows (YOLO26's
    // [1024, 5, 3, True]) leave it linear, as Ultralytics decides.
    p.use(SPPF(c1, c2, opt_int(1, 5), pools, opt_bool(3, false), L.args.size() <= 2));
  }
}

// Contract and Expand: space into channels and back, by `gain`.
void parse_reshape(ParsedLayer& p, const LayerSpec& L, const ArgReader& a, int n) {
  a.expect_count(0, 1);
  const int c1 = p.single_input(a, L.module);
  if (n != 1) throw std::runtime_error(a.where() + ": " + L.module + " cannot repeat");
  const int gain = a.has(0) ? a.integer(0, 0) : 2;
  if (gain < 1) throw std::runtime_error(a.where() + ": " + L.module + "'s gain must be >= 1");
  const bool is_contract = L.module == "Contract";
  if (!is_contract && c1 % (gain * gain) != 0) {
    throw std::runtime_error(a.where() + ": Expand needs channels divisible by gain^2 (" +
                             std::to_string(c1) + " by " + std::to_string(gain * gain) + ")");
  }
  p.c2 = is_contract ? c1 * gain * gain : c1 / (gain * gain);
  p.shown_args = {std::to_string(gain)};
  p.mod = std::make_shared<torch::nn::Module>(L.module);
  p.run = [gain, is_contract](const std::vector<torch::Tensor>& x) {
    return is_contract ? contract(x[0], gain) : expand(x[0], gain);
  };
}

void parse_concat(ParsedLayer& p, const ArgReader& a, int nc) {
  a.expect_count(0, 1);
  const int dim = a.has(0) ? a.integer(0, nc) : 1;
  if (dim != 1) throw std::runtime_error(a.where() + ": Concat supports dimension 1 only");
  for (int c : p.from_ch) p.c2 += c;
  p.shown_args = {std::to_string(dim)};
  p.mod = std::make_shared<torch::nn::Module>("Concat");
  p.run = [](const std::vector<torch::Tensor>& x) { return torch::cat(x, 1); };
}

void parse_upsample(ParsedLayer& p, const LayerSpec& L, const ArgReader& a) {
  a.expect_count(2, 3);
  p.c2 = p.single_input(a, L.module);
  if (a.has(0)) throw std::runtime_error(a.where() + ": nn.Upsample supports size=None only");
  const double scale = a.number(1);
  const std::string mode = L.args.size() > 2 ? L.args[2] : "nearest";
  if (mode != "nearest") {
    throw std::runtime_error(a.where() + ": nn.Upsample mode '" + mode +
                             "' is not supported (use 'nearest')");
  }
  p.use(torch::nn::Upsample(torch::nn::UpsampleOptions()
                                .scale_factor(std::vector<double>{scale, scale})
                                .mode(torch::kNearest)));
  p.shown_args = L.args;
}

// nn.MaxPool2d [k, s, p] and nn.ZeroPad2d [padding or (left, right, top, bottom)] (YOLOv3-tiny).
void parse_torch_layer(ParsedLayer& p, const LayerSpec& L, const ArgReader& a, int n) {
  p.c2 = p.single_input(a, L.module);
  if (n != 1) throw std::runtime_error(a.where() + ": " + L.module + " cannot repeat");
  p.shown_args = L.args;
  if (L.module == "nn.MaxPool2d") {
    a.expect_count(1, 3);
    const int k = a.integer(0, 0), s = a.has(1) ? a.integer(1, 0) : k;
    const int pad = a.has(2) ? a.integer(2, 0) : 0;
    p.use(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(k).stride(s).padding(pad)));
    return;
  }
  a.expect_count(1, 1);
  std::vector<int> pad = L.args[0].front() == '[' || L.args[0].front() == '('
                             ? a.int_list(0, /*allow_zero=*/true)
                             : std::vector<int>(4, a.integer(0, 0));
  if (pad.size() != 4) {
    throw std::runtime_error(a.where() +
                             ": nn.ZeroPad2d takes one padding or four (left, right, "
                             "top, bottom)");
  }
  p.use(torch::nn::ZeroPad2d(torch::nn::ZeroPad2dOptions({pad[0], pad[1], pad[2], pad[3]})));
}

// YOLOv5's Detect [nc, anchors].
void parse_anchor_detect(ParsedLayer& p, const LayerSpec& L, const ArgReader& a,
                         const ModelSpec& spec) {
  a.expect_count(2, 2);
  if (L.args[1] != "anchors") {
    throw std::runtime_error(a.where() + ": Detect's second argument must be 'anchors'");
  }
  std::vector<std::vector<double>> anchors = spec.anchors;
  if (spec.anchor_count > 0) {
    // A count of anchors: YOLOv5's placeholders 0, 1, 2, ... per level, for AutoAnchor to fit.
    std::vector<double> level;
    for (int k = 0; k < 2 * spec.anchor_count; ++k) level.push_back(k);
    anchors.assign(p.from_ch.size(), level);
  }
  if (p.from_ch.size() != anchors.size()) {
    throw std::runtime_error(a.where() + ": Detect has " + std::to_string(p.from_ch.size()) +
                             " inputs but 'anchors' has " + std::to_string(anchors.size()) +
                             " levels");
  }
  p.detect = Detect(a.integer(0, spec.nc), anchors, p.from_ch);
  p.head = p.detect.ptr();
  p.mod = p.detect.ptr();
  p.shown_args = {std::to_string(spec.nc), "anchors"};
}

// Ultralytics' anchor-free Detect [nc]: YOLOv8's classification branch ("legacy") unless the
// model has a C3k2 before it, as Ultralytics decides.
void parse_anchor_free_detect(ParsedLayer& p, const ArgReader& a, const ModelSpec& spec, size_t i) {
  a.expect_count(1, 1);
  bool legacy = true;
  for (size_t k = 0; k < i; ++k) legacy = legacy && spec.layers[k].module != "C3k2";
  auto head =
      AnchorFreeDetect(a.integer(0, spec.nc), spec.reg_max, legacy, p.from_ch, spec.end2end);
  p.head = head.ptr();
  p.mod = head.ptr();
  p.shown_args = {std::to_string(spec.nc), std::to_string(spec.reg_max),
                  spec.end2end ? "True" : "None"};
}

void parse_detect(ParsedLayer& p, const LayerSpec& L, const ArgReader& a, const ModelSpec& spec,
                  size_t i) {
  if (i + 1 != spec.layers.size())
    throw std::runtime_error(a.where() + ": Detect must be the last layer");
  if (spec.anchor_free) {
    if (L.args.size() == 2 && L.args[1] == "anchors") {
      throw std::runtime_error(a.where() + ": Detect [nc, anchors] needs 'anchors:' in the YAML");
    }
    parse_anchor_free_detect(p, a, spec, i);
  } else {
    parse_anchor_detect(p, L, a, spec);
  }
}

// Layer `i` of the YAML: its inputs (checked against the earlier layers) and its module.
ParsedLayer parse_layer(const ModelSpec& spec, size_t i, int n, const ModelScale& m,
                        const std::vector<int>& out_ch, int in_ch) {
  const LayerSpec& L = spec.layers[i];
  const ArgReader a(L, spec);
  ParsedLayer p;
  for (int f : L.from) {
    const int abs = f < 0 ? static_cast<int>(i) + f : f;
    if (abs >= static_cast<int>(i) || abs < -1 || (abs == -1 && f != -1)) {
      throw std::runtime_error(a.where() + ": 'from' index " + std::to_string(f) +
                               " does not name an earlier layer");
    }
    p.from.push_back(abs);
    p.from_ch.push_back(abs < 0 ? in_ch : out_ch[abs]);
  }
  if (block_modules().count(L.module)) {
    parse_block(p, L, a, n, m);
  } else if (L.module == "Contract" || L.module == "Expand") {
    parse_reshape(p, L, a, n);
  } else if (L.module == "nn.MaxPool2d" || L.module == "nn.ZeroPad2d") {
    parse_torch_layer(p, L, a, n);
  } else if (L.module == "Concat") {
    parse_concat(p, a, m.nc);
  } else if (L.module == "nn.Upsample") {
    parse_upsample(p, L, a);
  } else if (L.module == "Detect") {
    parse_detect(p, L, a, spec, i);
  } else {
    throw std::runtime_error(
        a.where() + ": unknown module '" + L.module +
        "' (supported: Conv, DWConv, GhostConv, Focus, Bottleneck, "
        "BottleneckCSP, GhostBottleneck, CrossConv, C3, C3x, C3TR, C3SPP, "
        "C3Ghost, SPP, SPPF, C2f, C3k2, C2PSA, Contract, Expand, Concat, nn.Upsample, "
        "nn.MaxPool2d, nn.ZeroPad2d, Detect)");
  }
  return p;
}

std::string from_text(const std::vector<int>& from) {
  if (from.size() == 1) return std::to_string(from[0]);
  std::string s = "[";
  for (size_t k = 0; k < from.size(); ++k) s += (k ? ", " : "") + std::to_string(from[k]);
  return s + "]";
}

}  // namespace

DetectionModelImpl::DetectionModelImpl(ModelSpec spec, int nc_override, int in_ch)
    : spec_(std::move(spec)) {
  if (nc_override > 0 && nc_override != spec_.nc) {
    log_info("Overriding model.yaml nc=" + std::to_string(spec_.nc) +
             " with nc=" + std::to_string(nc_override));
    spec_.nc = nc_override;
  }
  if (!spec_.anchor_free && spec_.anchor_count == 0 && spec_.anchors.empty()) {
    throw std::runtime_error(spec_.source + ": the model has no anchors");
  }
  const int na = spec_.anchor_free ? 0 : spec_.anchors_per_level();
  Activation activation;
  if (!spec_.activation.empty()) {
    try {
      activation = Activation::parse(spec_.activation);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(spec_.source + ":" + std::to_string(spec_.activation_line) +
                               ": activation: " + e.what());
    }
    log_info("activation: " + activation.text());
  }
  const DefaultActivation conv_activation(activation);
  const ModelScale scale{spec_.nc, spec_.anchor_free ? -1 : na * (spec_.nc + 5),
                         spec_.width_multiple, spec_.max_channels, spec_.scale};
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
    const int n = L.number > 1 ? std::max(py_round(L.number * spec_.depth_multiple), 1) : L.number;
    ParsedLayer p;
    try {
      p = parse_layer(spec_, i, n, scale, out_ch, in_ch);
    } catch (const c10::Error& e) {  // out of memory, or a size LibTorch refuses
      throw std::runtime_error(
          spec_.source + ":" + std::to_string(L.line) + ": layer " + std::to_string(i) + " (" +
          L.module + ") cannot be built: " + e.what_without_backtrace() +
          "; check its arguments and width_multiple " + format_number("%g", spec_.width_multiple));
    } catch (const std::bad_alloc&) {
      throw std::runtime_error(spec_.source + ":" + std::to_string(L.line) + ": layer " +
                               std::to_string(i) + " (" + L.module +
                               ") needs more memory than there is; check its arguments and "
                               "width_multiple " +
                               format_number("%g", spec_.width_multiple));
    }
    for (size_t k = 0; k < L.from.size(); ++k) {
      if (p.from[k] >= 0 && L.from[k] != -1) keep_[p.from[k]] = true;
    }
    if (p.head) {
      detect_ = p.detect;
      head_ = p.head;
      head_module_ = p.mod;
    }
    model->push_back(p.mod);
    layers_.push_back({p.from, p.run, static_cast<bool>(p.head)});
    out_ch.push_back(p.c2);
    table << std::right << std::setw(3) << i << std::setw(18) << from_text(L.from) << std::setw(3)
          << n << std::setw(10) << count_params(*p.mod) << "  " << std::left << std::setw(40)
          << ("models.common." + L.module) << join_args(p.shown_args) << "\n";
  }
  if (!head_) throw std::runtime_error(spec_.source + ": the model has no Detect layer");
  table_ = table.str();
  set_strides(in_ch);
  head_->initialize_biases();
}

// Strides from a forward pass (eval mode, so BatchNorm statistics stay untouched).
void DetectionModelImpl::set_strides(int in_ch) {
  torch::NoGradGuard no_grad;
  const int s = 256;
  eval();
  const auto raw = forward_raw(torch::zeros({1, in_ch, s, s}));
  train();
  std::vector<float> strides;
  for (const auto& r : raw) {
    strides.push_back(static_cast<float>(s) / r.size(2));
  }
  head_->set_strides(strides);
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
    if (L.is_detect) return head_->forward_levels(std::move(args));
    x = L.run(args);
    if (keep_[i]) saved[i] = x;
  }
  TORCH_CHECK(false, "model has no Detect layer");
}

ModelOutput DetectionModelImpl::forward(const torch::Tensor& x) {
  ModelOutput out;
  out.raw = forward_raw(x);
  if (!is_training()) out.pred = head_->decode(out.raw);
  return out;
}

torch::Tensor DetectionModelImpl::forward_augment(const torch::Tensor& x) {
  const int64_t h = x.size(2), w = x.size(3);
  const int gs = max_stride();
  const double scales[] = {1.0, 0.83, 0.67};
  const bool flips[] = {false, true, false};  // left-right
  std::vector<torch::Tensor> y;
  for (int k = 0; k < 3; ++k) {
    const double s = scales[k];
    torch::Tensor xi = flips[k] ? x.flip({3}) : x;
    if (s != 1.0) {  // YOLOv5's scale_img: bilinear resize, pad to a stride multiple with 0.447
      const int64_t sh = static_cast<int64_t>(h * s), sw = static_cast<int64_t>(w * s);
      xi = torch::nn::functional::interpolate(xi, torch::nn::functional::InterpolateFuncOptions()
                                                      .size(std::vector<int64_t>{sh, sw})
                                                      .mode(torch::kBilinear)
                                                      .align_corners(false));
      const auto padded = [&](int64_t v) {
        return static_cast<int64_t>(std::ceil(v * s / gs)) * gs;
      };
      xi = torch::constant_pad_nd(xi, {0, padded(w) - sw, 0, padded(h) - sh}, 0.447);
    }
    torch::Tensor p = forward(xi).pred;
    p.slice(2, 0, 4).div_(s);
    if (flips[k]) p.select(2, 0).mul_(-1).add_(static_cast<double>(w));
    y.push_back(p);
  }
  // YOLOv5's _clip_augmented: without the first pass's last level and the last pass's first.
  const int nl = head_->num_levels();
  int64_t g = 0;
  for (int i = 0; i < nl; ++i) g += static_cast<int64_t>(std::pow(4, i));
  y.front() = y.front().slice(1, 0, y.front().size(1) - y.front().size(1) / g);
  y.back() = y.back().slice(1, (y.back().size(1) / g) * static_cast<int64_t>(std::pow(4, nl - 1)));
  return torch::cat(y, 1);
}

void DetectionModelImpl::fuse() {
  for_each_conv(*this, [](ConvImpl& c) { c.fuse(); });
}

std::vector<int> DetectionModelImpl::strides() const {
  std::vector<int> s;
  const torch::Tensor st = head_->level_strides();
  for (int i = 0; i < head_->num_levels(); ++i) s.push_back(static_cast<int>(st[i].item<float>()));
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

void to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& t : module.parameters()) {
    if (t.dim() == 4) t.set_data(t.contiguous(at::MemoryFormat::ChannelsLast));
  }
  for (auto& t : module.buffers()) {
    if (t.dim() == 4) t.set_data(t.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

}  // namespace yolo

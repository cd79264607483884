#include "utils/engine/hyp.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "utils/core/format.h"
#include "utils/core/yaml_io.h"

namespace yolo {

namespace {

// Every hyperparameter, by YOLOv5 key, in YOLOv5's file order: reading, writing and the by-name
// accessors all go through this table.
const std::vector<std::pair<std::string, double Hyp::*>>& fields() {
  static const std::vector<std::pair<std::string, double Hyp::*>> table = {
      {"lr0", &Hyp::lr0},
      {"lrf", &Hyp::lrf},
      {"momentum", &Hyp::momentum},
      {"weight_decay", &Hyp::weight_decay},
      {"warmup_epochs", &Hyp::warmup_epochs},
      {"warmup_momentum", &Hyp::warmup_momentum},
      {"warmup_bias_lr", &Hyp::warmup_bias_lr},
      {"box", &Hyp::box},
      {"cls", &Hyp::cls},
      {"cls_pw", &Hyp::cls_pw},
      {"obj", &Hyp::obj},
      {"obj_pw", &Hyp::obj_pw},
      {"iou_t", &Hyp::iou_t},
      {"anchor_t", &Hyp::anchor_t},
      {"anchors", &Hyp::anchors},  // optional: has_anchors says whether it was given
      {"fl_gamma", &Hyp::fl_gamma},
      {"hsv_h", &Hyp::hsv_h},
      {"hsv_s", &Hyp::hsv_s},
      {"hsv_v", &Hyp::hsv_v},
      {"degrees", &Hyp::degrees},
      {"translate", &Hyp::translate},
      {"scale", &Hyp::scale},
      {"shear", &Hyp::shear},
      {"perspective", &Hyp::perspective},
      {"flipud", &Hyp::flipud},
      {"fliplr", &Hyp::fliplr},
      {"mosaic", &Hyp::mosaic},
      {"mixup", &Hyp::mixup},
      {"copy_paste", &Hyp::copy_paste},
      {"dfl", &Hyp::dfl},  // optional: has_dfl says whether it was given
  };
  return table;
}

const char kAnchors[] = "anchors";
const char kDfl[] = "dfl";

double Hyp::*field(const std::string& key) {
  for (const auto& [name, member] : fields()) {
    if (name == key) return member;
  }
  return nullptr;
}

double Hyp::*known_field(const std::string& key) {
  double Hyp::*m = field(key);
  if (!m) throw std::logic_error("'" + key + "' is not a hyperparameter");
  return m;
}

std::string unknown_key_hint(const std::string& key) {
  std::vector<std::string> names;
  for (const auto& f : fields()) names.push_back(f.first);
  const std::vector<std::string> near = close_words(key, names);
  if (!near.empty()) return "did you mean " + quoted_choices(near) + "?";
  return "YOLOv5 v7.0 keys only; see hyp/hyp.scratch-low.yaml for the full list";
}

// The optimizer's settings: a negative one would reach LibTorch's own "Invalid learning rate",
// which names neither file nor key. (Augmentation ranges are checked with the data.)
bool non_negative(const std::string& key) {
  static const char* const kNonNegative[] = {"lr0",           "lrf",           "momentum",
                                             "weight_decay",  "warmup_epochs", "warmup_momentum",
                                             "warmup_bias_lr"};
  return std::any_of(std::begin(kNonNegative), std::end(kNonNegative),
                     [&](const char* k) { return key == k; });
}

std::string line_of(const YAML::Node& n, const std::string& ctx) {
  return ctx + ":" + std::to_string(n.Mark().line + 1);
}

const char* kind_of(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

}  // namespace

double Hyp::at(const std::string& key) const {
  double Hyp::*m = known_field(key);
  if (key == kAnchors && !has_anchors) {
    throw std::runtime_error("hyperparameter 'anchors' is not set");
  }
  return this->*m;
}

double Hyp::get(const std::string& key, double fallback) const {
  double Hyp::*m = field(key);
  if (!m || (key == kAnchors && !has_anchors)) return fallback;
  return this->*m;
}

void Hyp::set(const std::string& key, double v) {
  this->*known_field(key) = v;
  if (key == kAnchors) has_anchors = true;
  if (key == kDfl) has_dfl = true;
}

const std::vector<std::string>& required_hyp_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const auto& f : fields()) {
      if (f.first != kAnchors && f.first != kDfl) k.push_back(f.first);
    }
    return k;
  }();
  return keys;
}

Hyp hyp_from_yaml(const YAML::Node& node, const std::string& ctx) {
  if (!node.IsMap()) {
    throw std::runtime_error(ctx + ": a hyp file must be a mapping of name: value");
  }
  Hyp h;
  std::vector<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      throw std::runtime_error(line_of(kv.first, ctx) + ": a hyperparameter name must be a word");
    }
    const std::string key = kv.first.Scalar();
    if (!field(key)) {
      throw std::runtime_error(line_of(kv.first, ctx) + ": unknown hyperparameter '" + key + "' (" +
                               unknown_key_hint(key) + ")");
    }
    if (!kv.second.IsScalar()) {
      throw std::runtime_error(line_of(kv.first, ctx) + ": '" + key + "' must be a number, got " +
                               kind_of(kv.second));
    }
    double value = 0;
    try {
      value = kv.second.as<double>();
    } catch (const YAML::Exception&) {
      throw std::runtime_error(line_of(kv.second, ctx) + ": '" + key + "' must be a number, got '" +
                               kv.second.Scalar() + "'");
    }
    if (non_negative(key) && !(value >= 0)) {
      throw std::runtime_error(line_of(kv.second, ctx) + ": '" + key + "' must be >= 0, got " +
                               kv.second.Scalar());
    }
    h.set(key, value);
    seen.push_back(key);
  }
  for (const auto& k : required_hyp_keys()) {
    if (std::find(seen.begin(), seen.end(), k) == seen.end()) {
      throw std::runtime_error(ctx + ": missing hyperparameter '" + k +
                               "' (see hyp/hyp.scratch-low.yaml for the full list)");
    }
  }
  return h;
}

Hyp load_hyp(const std::string& path) { return hyp_from_yaml(load_yaml_file(path), path); }

std::string check_hyp_set(const std::vector<std::string>& items) {
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return "'" + item + "' is not key=value (e.g. lr0=0.02)";
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!field(key)) {
      return "unknown hyperparameter '" + key + "' (" + unknown_key_hint(key) + ")";
    }
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') return "'" + key + "' must be a number, got '" + value + "'";
  }
  return "";
}

std::map<std::string, std::string> hyp_set_words(const std::vector<std::string>& items,
                                                 const std::string& flag) {
  std::map<std::string, std::string> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) out[item.substr(0, eq)] = flag.empty() ? item : flag + " " + item;
  }
  return out;
}

Hyp apply_hyp_set(const Hyp& hyp, const std::vector<std::string>& items, const std::string& flag) {
  if (items.empty()) return hyp;
  if (const std::string bad = check_hyp_set(items); !bad.empty()) {
    throw std::runtime_error((flag.empty() ? "" : flag + ": ") + bad);
  }
  Hyp out = hyp;
  for (const auto& [key, word] : hyp_set_words(items, flag)) {
    const double value = std::strtod(word.substr(word.find('=') + 1).c_str(), nullptr);
    if (!std::isfinite(value)) throw std::runtime_error(word + ": '" + key + "' must be finite");
    if (non_negative(key) && !(value >= 0)) {
      throw std::runtime_error(word + ": '" + key + "' must be >= 0");
    }
    out.set(key, value);
  }
  return out;
}

int hyp_anchor_count(const Hyp& hyp, const std::string& hyp_path) {
  if (!hyp.has_anchors) return 0;
  if (!(hyp.anchors >= 0 && hyp.anchors < 16.5)) {
    throw std::runtime_error(hyp_path + ": anchors: " + format_number("%g", hyp.anchors) +
                             " must be a count of anchors per output layer from 0 (the model "
                             "YAML's anchors) to 16");
  }
  return static_cast<int>(std::nearbyint(hyp.anchors));
}

YAML::Node hyp_to_yaml(const Hyp& hyp) {
  YAML::Node n;
  for (const auto& [name, member] : fields()) {
    if ((name != kAnchors || hyp.has_anchors) && (name != kDfl || hyp.has_dfl)) {
      n[name] = yaml_number(hyp.*member);
    }
  }
  return n;
}

LossGains scale_loss_gains(const Hyp& hyp, int nl, int nc, int imgsz, double label_smoothing) {
  LossGains g;
  const double layers = 3.0 / nl;
  g.box = hyp.box * layers;
  g.cls = hyp.cls * nc / 80.0 * layers;
  g.obj = hyp.obj * std::pow(imgsz / 640.0, 2) * layers;
  g.cls_pw = hyp.cls_pw;
  g.obj_pw = hyp.obj_pw;
  g.anchor_t = hyp.anchor_t;
  g.fl_gamma = hyp.fl_gamma;
  g.label_smoothing = label_smoothing;
  return g;
}

}  // namespace yolo

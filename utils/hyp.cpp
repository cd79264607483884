#include "utils/hyp.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "utils/yaml_io.h"

namespace yolo {

double Hyp::at(const std::string& key) const {
  auto it = values.find(key);
  if (it == values.end()) throw std::runtime_error("hyperparameter '" + key + "' is not set");
  return it->second;
}

double Hyp::get(const std::string& key, double fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second;
}

const std::vector<std::string>& required_hyp_keys() {
  static const std::vector<std::string> keys = {"lr0",
                                                "lrf",
                                                "momentum",
                                                "weight_decay",
                                                "warmup_epochs",
                                                "warmup_momentum",
                                                "warmup_bias_lr",
                                                "box",
                                                "cls",
                                                "cls_pw",
                                                "obj",
                                                "obj_pw",
                                                "iou_t",
                                                "anchor_t",
                                                "fl_gamma",
                                                "hsv_h",
                                                "hsv_s",
                                                "hsv_v",
                                                "degrees",
                                                "translate",
                                                "scale",
                                                "shear",
                                                "perspective",
                                                "flipud",
                                                "fliplr",
                                                "mosaic",
                                                "mixup",
                                                "copy_paste"};
  return keys;
}

Hyp hyp_from_yaml(const YAML::Node& node, const std::string& ctx) {
  if (!node.IsMap())
    throw std::runtime_error(ctx + ": a hyp file must be a mapping of name: value");
  Hyp h;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (!kv.second.IsScalar()) continue;  // e.g. an albumentations list: not a number we use
    try {
      h.values[key] = kv.second.as<double>();
    } catch (const YAML::Exception&) {
      throw std::runtime_error(ctx + ":" + std::to_string(kv.second.Mark().line + 1) + ": '" + key +
                               "' must be a number, got '" + kv.second.Scalar() + "'");
    }
  }
  for (const auto& k : required_hyp_keys()) {
    if (!h.values.count(k)) {
      throw std::runtime_error(ctx + ": missing hyperparameter '" + k +
                               "' (see hyp/hyp.scratch-low.yaml for the full list)");
    }
  }
  return h;
}

Hyp load_hyp(const std::string& path) { return hyp_from_yaml(load_yaml_file(path), path); }

YAML::Node hyp_to_yaml(const Hyp& hyp) {
  YAML::Node n;
  for (const auto& k : required_hyp_keys()) {
    if (hyp.values.count(k)) n[k] = yaml_number(hyp.values.at(k));
  }
  for (const auto& [k, v] : hyp.values) {
    if (!n[k]) n[k] = yaml_number(v);
  }
  return n;
}

}  // namespace yolo

#include "models/model_config.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "utils/core/yaml_io.h"

namespace yolo {

namespace {

std::string at(const std::string& src, const YAML::Node& n) {
  return src + ":" + std::to_string(n.Mark().line + 1);
}

// `anchors:` as per-level lists of w,h pairs, or a count per level (placeholders).
void parse_anchors(const YAML::Node& root, const std::string& src, ModelSpec& spec) {
  const YAML::Node anchors = root["anchors"];
  if (anchors && anchors.IsScalar()) {
    int count = 0;
    try {
      count = anchors.as<int>();
    } catch (const YAML::Exception&) {
      count = 0;
    }
    if (count < 1 || count > 16) {
      throw std::runtime_error(at(src, anchors) +
                               ": 'anchors' must be per-level lists of w,h pairs in pixels, or a "
                               "count of anchors per level from 1 to 16, not '" +
                               anchors.Scalar() + "'");
    }
    spec.anchor_count = count;
  } else if (!anchors || !anchors.IsSequence() || anchors.size() == 0) {
    throw std::runtime_error(src +
                             ": 'anchors' must be a list of per-level lists (w,h pairs in pixels)");
  }
  if (spec.anchor_count == 0) {
    for (const auto& level : anchors) {
      if (!level.IsSequence() || level.size() == 0 || level.size() % 2 != 0) {
        throw std::runtime_error(at(src, level) + ": each anchors entry needs w,h pairs");
      }
      std::vector<double> v;
      for (const auto& a : level) {
        try {
          v.push_back(a.as<double>());
        } catch (const YAML::Exception&) {
          throw std::runtime_error(at(src, a) + ": anchor values must be numbers");
        }
      }
      if (!spec.anchors.empty() && v.size() != spec.anchors[0].size()) {
        throw std::runtime_error(at(src, level) + ": every level needs the same number of anchors");
      }
      spec.anchors.push_back(std::move(v));
    }
  }
}

// `backbone:` then `head:`, each a list of [from, number, module, args].
void parse_layers(const YAML::Node& root, const std::string& src, ModelSpec& spec) {
  for (const char* part : {"backbone", "head"}) {
    const YAML::Node list = root[part];
    if (!list || !list.IsSequence()) {
      throw std::runtime_error(src + ": '" + part +
                               "' must be a list of [from, number, module, args]");
    }
    for (const auto& row : list) {
      const std::string where = at(src, row);
      if (!row.IsSequence() || row.size() != 4) {
        throw std::runtime_error(where + ": a layer must be [from, number, module, args]");
      }
      LayerSpec L;
      L.line = row.Mark().line + 1;
      try {
        if (row[0].IsSequence()) {
          for (const auto& f : row[0]) L.from.push_back(f.as<int>());
        } else {
          L.from.push_back(row[0].as<int>());
        }
        L.number = row[1].as<int>();
        L.module = row[2].as<std::string>();
      } catch (const YAML::Exception&) {
        throw std::runtime_error(where +
                                 ": 'from' must be an int or list of ints, 'number' an int "
                                 "and 'module' a name");
      }
      if (L.from.empty() || L.number < 1) {
        throw std::runtime_error(where + ": 'from' must not be empty and 'number' must be >= 1");
      }
      if (!row[3].IsSequence()) throw std::runtime_error(where + ": 'args' must be a list");
      for (const auto& a : row[3]) {
        if (a.IsNull()) {  // Python's None, as a pickled model's yaml holds it
          L.args.push_back("None");
          continue;
        }
        if (a.IsScalar()) {
          L.args.push_back(a.Scalar());
          continue;
        }
        // A list of scalars, such as SPP's kernel sizes [5, 9, 13].
        std::string text = "[";
        bool flat = a.IsSequence() && a.size() > 0;
        for (size_t k = 0; flat && k < a.size(); ++k) {
          flat = a[k].IsScalar();
          if (flat) text += (k ? ", " : "") + a[k].Scalar();
        }
        if (!flat) {
          throw std::runtime_error(at(src, a) +
                                   ": a module argument must be a scalar or a list of scalars");
        }
        L.args.push_back(text + "]");
      }
      spec.layers.push_back(std::move(L));
    }
  }
}

ModelSpec parse_node(const YAML::Node& root, const std::string& src) {
  if (!root.IsMap()) throw std::runtime_error(src + ": a model YAML must be a mapping");
  ModelSpec spec;
  spec.source = src;
  spec.nc = yaml_get<int>(root, "nc", src);
  spec.depth_multiple = yaml_get<double>(root, "depth_multiple", src);
  spec.width_multiple = yaml_get<double>(root, "width_multiple", src);
  if (spec.nc < 1) throw std::runtime_error(at(src, root["nc"]) + ": nc must be >= 1");
  // YOLOv5's models use 0.33-1.33 and 0.25-1.25; far past them a model fills no memory there is,
  // and the allocator's message would name neither the file nor the key.
  for (const char* key : {"depth_multiple", "width_multiple"}) {
    const double v = root[key].as<double>();
    if (!(v > 0 && v <= 16)) {
      throw std::runtime_error(at(src, root[key]) + ": " + key + " " + root[key].Scalar() +
                               " is out of range: it must be > 0 and at most 16 (YOLOv5's "
                               "models use 0.25 to 1.33)");
    }
  }
  parse_anchors(root, src, spec);
  if (const YAML::Node act = root["activation"]; act && !act.IsNull()) {
    if (!act.IsScalar()) {
      throw std::runtime_error(at(src, act) + ": 'activation' must be a module such as " +
                               "nn.LeakyReLU(0.1)");
    }
    spec.activation = act.Scalar();
    spec.activation_line = act.Mark().line + 1;
  }
  parse_layers(root, src, spec);
  if (spec.layers.empty()) throw std::runtime_error(src + ": the model has no layers");
  return spec;
}

}  // namespace

ModelSpec parse_model_spec_file(const std::string& path) {
  return parse_node(load_yaml_file(path), path);
}

ModelSpec parse_model_spec_string(const std::string& yaml, const std::string& source) {
  return parse_node(load_yaml_text(yaml, source), source);
}

}  // namespace yolo

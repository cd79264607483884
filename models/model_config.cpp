#include "models/model_config.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/yaml_io.h"

namespace yolo {

namespace {

std::string fs_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

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

// Ultralytics' `scales:` (letter: [depth, width, max_channels]): the letter the file was named
// with, else the first one (as Ultralytics, with a warning).
void parse_scales(const YAML::Node& root, const std::string& src, const std::string& scale,
                  ModelSpec& spec) {
  const YAML::Node scales = root["scales"];
  if (!scales.IsMap() || scales.size() == 0) {
    throw std::runtime_error(at(src, scales) +
                             ": 'scales' must map scale letters to [depth, width, max_channels]");
  }
  std::string letters;
  for (const auto& kv : scales) letters += (letters.empty() ? "" : ", ") + kv.first.Scalar();
  std::string chosen = scale;
  if (chosen.empty()) {
    chosen = scales.begin()->first.Scalar();
    log_warn(src + ": no model scale in the file name (such as yolo11n.yaml); using scale '" +
             chosen + "'");
  }
  const YAML::Node row = scales[chosen];
  if (!row) {
    throw std::runtime_error(src + ": scale '" + chosen + "' is not in 'scales' (it has " +
                             letters + "); put one of those letters in the model's name");
  }
  std::vector<double> v;
  try {
    v = row.as<std::vector<double>>();
  } catch (const YAML::Exception&) {
  }
  if (v.size() != 3 || !(v[0] > 0 && v[0] <= 16) || !(v[1] > 0 && v[1] <= 16) || !(v[2] >= 8)) {
    throw std::runtime_error(at(src, row) + ": scale '" + chosen +
                             "' must be [depth (0-16], width (0-16], max_channels >= 8]");
  }
  spec.scale = chosen;
  spec.depth_multiple = v[0];
  spec.width_multiple = v[1];
  spec.max_channels = v[2];
}

// YOLOv5's multiples, required when there are no `scales:`.
void parse_multiples(const YAML::Node& root, const std::string& src, ModelSpec& spec) {
  spec.depth_multiple = yaml_get<double>(root, "depth_multiple", src);
  spec.width_multiple = yaml_get<double>(root, "width_multiple", src);
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
}

ModelSpec parse_node(const YAML::Node& root, const std::string& src) {
  if (!root.IsMap()) throw std::runtime_error(src + ": a model YAML must be a mapping");
  ModelSpec spec;
  spec.source = src;
  spec.nc = yaml_get<int>(root, "nc", src);
  if (spec.nc < 1) throw std::runtime_error(at(src, root["nc"]) + ": nc must be >= 1");
  spec.anchor_free = !root["anchors"];
  if (root["scales"]) {
    // The letter a file was named with (read_model_yaml writes it as `scale:`), as Ultralytics.
    const YAML::Node scale = root["scale"];
    parse_scales(root, src, scale && scale.IsScalar() ? scale.Scalar() : "", spec);
  } else {
    parse_multiples(root, src, spec);
  }
  if (spec.anchor_free) {
    if (const YAML::Node r = root["reg_max"]; r && !r.IsNull()) {
      spec.reg_max = yaml_get<int>(root, "reg_max", src);
      if (spec.reg_max < 1 || spec.reg_max > 64) {
        throw std::runtime_error(at(src, r) + ": reg_max must be 1 to 64");
      }
    }
    if (const YAML::Node e = root["end2end"]; e && !e.IsNull()) {
      spec.end2end = yaml_get<bool>(root, "end2end", src);
    }
  } else {
    parse_anchors(root, src, spec);
  }
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

std::string read_model_yaml(const std::string& path) {
  const ScaledModelName scaled = scaled_model_name(path);
  if (scaled.unified.empty() || file_problem(path) != "not found" ||
      !file_problem(scaled.unified).empty()) {
    return read_text_file(path);
  }
  std::string text = read_text_file(scaled.unified);
  if (!load_yaml_text(text, scaled.unified)["scales"]) {
    throw std::runtime_error(path + " not found, and " + scaled.unified +
                             " has no 'scales' to read scale '" + scaled.scale + "' from");
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text + "scale: " + scaled.scale + "  # from the name " + fs_name(path) + "\n";
}

ModelSpec parse_model_spec_file(const std::string& path) {
  return parse_node(load_yaml_text(read_model_yaml(path), path), path);
}

ModelSpec parse_model_spec_string(const std::string& yaml, const std::string& source) {
  return parse_node(load_yaml_text(yaml, source), source);
}

}  // namespace yolo

#include "models/yolov5_checkpoint.h"

#include <ATen/ATen.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <set>
#include <stdexcept>

namespace yolo {
namespace {

using Type = PyValue::Type;

constexpr int kMaxDepth = 64;  // modules and YAML nest a few levels; more is a hostile file
// Modules, weights and YAML values visited: yolov5x has about 700 modules and 745 weights. A
// pickle may share one child under many names (a DAG whose paths grow exponentially), so the
// walks count every visit, and a tensor met again is the same tensor, not another copy.
constexpr int64_t kMaxVisits = 100000;

struct Walk {
  int64_t visits = 0;
  std::map<const PyValue*, at::Tensor> converted;
};

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// "conv.Conv2d" after a prefix: dotted Python identifiers only.
bool is_dotted_identifier(const std::string& s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  }
  return s.find("..") == std::string::npos;
}

[[noreturn]] void malformed(const std::string& path, const std::string& why) {
  throw std::runtime_error(path +
                           ": not a YOLOv5 or Ultralytics checkpoint this trainer reads: " + why);
}

at::Tensor as_weight(const at::Tensor& t) {
  // YOLOv5 saves FP16 copies; training and inference start from float32, as its .float() does.
  return (t.is_floating_point() ? t.to(at::kFloat) : t).contiguous();
}

// A module's parameters and persistent buffers, then its submodules', under `prefix`: the
// names state_dict() gives them.
void collect_state(const PyValue& module, const std::string& prefix, int depth,
                   const std::string& path, Yolov5Checkpoint::Weights& out, Walk& walk) {
  if (depth > kMaxDepth) malformed(path, "modules nested deeper than " + std::to_string(kMaxDepth));
  if (++walk.visits > kMaxVisits) {
    malformed(path, "more than " + std::to_string(kMaxVisits) + " modules and weights");
  }
  if (!module.is(Type::kObject) || !module.state) {
    malformed(path, "'" + prefix + "' is a " + module.type_name() + ", not a module");
  }
  std::set<std::string> transient;
  if (const PyValue* np = module.find("_non_persistent_buffers_set")) {
    for (const auto& n : np->items) {
      if (n->is(Type::kStr)) transient.insert(n->text);
    }
  }
  for (const char* part : {"_parameters", "_buffers"}) {
    const PyValue* d = module.find(part);
    if (!d) continue;
    if (!d->is(Type::kDict)) malformed(path, prefix + part + " is not a dict");
    for (const auto& [k, v] : d->entries) {
      if (!k->is(Type::kStr)) malformed(path, prefix + part + " has a non-string name");
      if (v->is(Type::kNone) || transient.count(k->text)) continue;
      if (!v->is(Type::kTensor)) {
        malformed(path, "'" + prefix + k->text + "' is a " + v->type_name() + ", not a tensor");
      }
      if (++walk.visits > kMaxVisits) {
        malformed(path, "more than " + std::to_string(kMaxVisits) + " modules and weights");
      }
      auto known = walk.converted.find(v.get());
      if (known == walk.converted.end()) {
        known = walk.converted.emplace(v.get(), as_weight(v->tensor)).first;
      }
      out[prefix + k->text] = known->second;
    }
  }
  const PyValue* children = module.find("_modules");
  if (!children) return;
  if (!children->is(Type::kDict)) malformed(path, prefix + "_modules is not a dict");
  for (const auto& [k, v] : children->entries) {
    if (!k->is(Type::kStr)) malformed(path, prefix + "_modules has a non-string name");
    if (!v->is(Type::kNone)) {
      collect_state(*v, prefix + k->text + ".", depth + 1, path, out, walk);
    }
  }
}

// Python's repr of a float, which is what a YAML reader gets back exactly.
std::string float_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

void emit(YAML::Emitter& e, const PyValue& v, int depth, const std::string& path, int64_t& visits) {
  if (depth > kMaxDepth) malformed(path, "its model yaml nests too deep");
  if (++visits > kMaxVisits) malformed(path, "its model yaml holds too many values");
  switch (v.type) {
    case Type::kNone:
      e << YAML::Null;
      return;
    case Type::kBool:
      e << (v.boolean ? "True" : "False");
      return;
    case Type::kInt:
      e << v.integer;
      return;
    case Type::kFloat:
      e << float_text(v.real);
      return;
    case Type::kStr:
      e << v.text;
      return;
    case Type::kList:
    case Type::kTuple:
      e << YAML::Flow << YAML::BeginSeq;
      for (const auto& i : v.items) emit(e, *i, depth + 1, path, visits);
      e << YAML::EndSeq;
      return;
    case Type::kDict:
      e << YAML::BeginMap;
      for (const auto& [k, val] : v.entries) {
        if (!k->is(Type::kStr)) malformed(path, "its model yaml has a non-string key");
        e << YAML::Key << k->text << YAML::Value;
        emit(e, *val, depth + 1, path, visits);
      }
      e << YAML::EndMap;
      return;
    default:
      malformed(path, "its model yaml holds a " + v.type_name());
  }
}

std::vector<std::string> class_names(const PyValue* names, const std::string& path) {
  std::vector<std::string> out;
  if (!names || names->is(Type::kNone)) return out;
  if (names->is(Type::kList) || names->is(Type::kTuple)) {
    for (const auto& n : names->items) {
      if (!n->is(Type::kStr)) malformed(path, "a class name is a " + n->type_name());
      out.push_back(n->text);
    }
    return out;
  }
  if (!names->is(Type::kDict)) malformed(path, "'names' is a " + names->type_name());
  std::map<int64_t, std::string> by_index;
  for (const auto& [k, v] : names->entries) {
    if (!k->is(Type::kInt) || !v->is(Type::kStr)) {
      malformed(path, "'names' is not a dict of {index: name}");
    }
    by_index[k->integer] = v->text;
  }
  for (const auto& [i, n] : by_index) {
    if (i != static_cast<int64_t>(out.size())) {
      malformed(path,
                "'names' does not number its classes 0.." + std::to_string(by_index.size() - 1));
    }
    out.push_back(n);
  }
  return out;
}

bool is_model_object(const PyValue* v) { return v && v->is(Type::kObject); }

}  // namespace

bool is_yolov5_checkpoint_global(const std::string& q) {
  // YOLOv5's model classes, and Ultralytics' (8.x: YOLOv8, YOLO11 and the other tasks' models,
  // which the model check below refuses by name).
  static const char* const kPrefixes[] = {"models.yolo.",           "models.common.",
                                          "yolov5.models.yolo.",    "yolov5.models.common.",
                                          "torch.nn.modules.",      "ultralytics.nn.tasks.",
                                          "ultralytics.nn.modules."};
  for (const char* p : kPrefixes) {
    if (starts_with(q, p)) return is_dotted_identifier(q.substr(std::string(p).size()));
  }
  static const std::set<std::string> kRecords = {"numpy.core.multiarray._reconstruct",
                                                 "numpy.core.multiarray.scalar",
                                                 "numpy._core.multiarray._reconstruct",
                                                 "numpy._core.multiarray.scalar",
                                                 "numpy.ndarray",
                                                 "numpy.dtype",
                                                 "pathlib.PosixPath",
                                                 "ultralytics.utils.IterableSimpleNamespace",
                                                 "torch.Size",
                                                 "pathlib.WindowsPath",
                                                 "pathlib.Path"};
  return kRecords.count(q) > 0;
}

std::string yaml_text_of(const PyValue& yaml, const std::string& path) {
  if (!yaml.is(Type::kDict)) malformed(path, "its model's 'yaml' is a " + yaml.type_name());
  YAML::Emitter e;
  int64_t visits = 0;
  emit(e, yaml, 0, path, visits);
  if (!e.good()) malformed(path, "its model yaml cannot be written (" + e.GetLastError() + ")");
  return std::string(e.c_str()) + "\n";
}

std::optional<Yolov5Checkpoint> yolov5_checkpoint(const PyValue& root, const std::string& path) {
  if (!root.is(Type::kDict)) return std::nullopt;
  const PyValue* model = root.find("model");
  const PyValue* ema = root.find("ema");
  if (!is_model_object(model) && !is_model_object(ema)) return std::nullopt;
  const PyValue& m = is_model_object(model) ? *model : *ema;
  Yolov5Checkpoint c;
  c.model_class = m.text;
  const std::string cls = m.text.substr(m.text.rfind('.') + 1);
  if (cls != "DetectionModel" && cls != "Model") {
    malformed(path, "its model is a " + m.text +
                        "; this trainer trains and runs detection models (DetectionModel)");
  }
  Walk walk;
  collect_state(m, "", 0, path, c.model, walk);
  if (is_model_object(ema) && is_model_object(model)) collect_state(*ema, "", 0, path, c.ema, walk);
  const PyValue* yaml = m.find("yaml");
  if (!yaml) malformed(path, "its model has no 'yaml' (the architecture)");
  c.model_yaml = yaml_text_of(*yaml, path);
  c.names = class_names(m.find("names"), path);
  const PyValue* nc = m.find("nc");
  const PyValue* yaml_nc = yaml->find("nc");
  if (nc && nc->is(Type::kInt)) {
    c.nc = static_cast<int>(nc->integer);
  } else if (yaml_nc && yaml_nc->is(Type::kInt)) {
    c.nc = static_cast<int>(yaml_nc->integer);
  }
  if (const PyValue* s = m.find("stride"); s && s->is(Type::kTensor) && s->tensor.dim() == 1) {
    const at::Tensor st = s->tensor.to(at::kDouble);
    for (int64_t i = 0; i < st.numel(); ++i) c.stride.push_back(st[i].item<double>());
  }
  if (const PyValue* e = root.find("epoch"); e && e->is(Type::kInt)) c.epoch = e->integer;
  const PyValue* opt = root.find("optimizer");
  c.has_optimizer = opt && !opt->is(Type::kNone);
  return c;
}

}  // namespace yolo

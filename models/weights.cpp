#include "models/weights.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "models/unpickler.h"
#include "utils/core/errors.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"

namespace yolo {

StateDict state_dict(const torch::nn::Module& module) {
  StateDict sd;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) sd[p.key()] = p.value();
  for (const auto& b : module.named_buffers(/*recurse=*/true)) sd[b.key()] = b.value();
  return sd;
}

namespace {

// {name: tensor}: true and `out` filled, or false for anything else.
bool to_state_dict(const PyValue& v, StateDict& out) {
  if (!v.is(PyValue::Type::kDict)) return false;
  for (const auto& [k, t] : v.entries) {
    if (!k->is(PyValue::Type::kStr) || !t->is(PyValue::Type::kTensor)) return false;
    // float16 (stripped weights) is read as float32, what training and inference use.
    out[k->text] = t->tensor.scalar_type() == at::kHalf ? t->tensor.to(at::kFloat) : t->tensor;
  }
  return true;
}

const char* const kReadHint =
    "; weights are YOLOv5 .pt files, checkpoints written by this trainer, or a saved "
    "{name: tensor} state_dict";

}  // namespace

WeightsFile read_weights_file(const std::string& path) {
  const PyRef root =
      unpickle_torch_archive(path, "weights file", is_yolov5_checkpoint_global, kReadHint);
  WeightsFile out;
  if (auto v5 = yolov5_checkpoint(*root, path)) {
    out.weights = v5->model.empty() ? v5->ema : v5->model;
    out.yolov5 = std::move(v5);
    return out;
  }
  if (to_state_dict(*root, out.weights)) return out;
  const PyValue* model = root->find("model");
  if (model && to_state_dict(*model, out.weights)) {
    const PyValue* opt = root->find("opt");
    if (opt && opt->is(PyValue::Type::kStr)) out.opt_yaml = opt->text;
    const PyValue* yaml = root->find("model_yaml");
    if (yaml && yaml->is(PyValue::Type::kStr)) out.model_yaml = yaml->text;
    if (const PyValue* names = root->find("names")) {
      if (!names->is(PyValue::Type::kList)) {
        throw std::runtime_error(path + ": key 'names' is a " + names->type_name() +
                                 ", not a list of class names");
      }
      for (const PyRef& n : names->items) {
        if (!n->is(PyValue::Type::kStr)) {
          throw std::runtime_error(path + ": key 'names' holds a " + n->type_name() +
                                   ", not a class name");
        }
        out.names.push_back(n->text);
      }
    }
    return out;
  }
  throw std::runtime_error(path +
                           ": expected a dict of {name: tensor}, a checkpoint with a 'model' "
                           "dict, or a YOLOv5 checkpoint; got a " +
                           root->type_name());
}

StateDict read_state_dict(const std::string& path) { return read_weights_file(path).weights; }

bool is_yolov5_checkpoint(const std::string& path) {
  try {
    return read_weights_file(path).yolov5.has_value();
  } catch (const std::exception&) {
    return false;
  }
}

std::string model_cfg_for_weights(const WeightsFile& file, const std::string& weights) {
  if (file.yolov5) return "";
  if (!file.opt_yaml.empty()) {
    try {
      const YAML::Node opt = YAML::Load(file.opt_yaml);
      if (opt["cfg"] && opt["cfg"].IsScalar()) {
        return resolve_config(opt["cfg"].Scalar(), ConfigKind::kModel, "--cfg");
      }
    } catch (const std::exception&) {
      // A damaged opt text or a model YAML that is gone: fall back to the file name.
    }
  }
  // Plain weights hold tensors only; the stem names the architecture (yolov5s.pt -> yolov5s).
  const std::string stem = std::filesystem::path(weights).stem().string();
  try {
    return resolve_config(stem + ".yaml", ConfigKind::kModel, "--cfg");
  } catch (const UsageError&) {
    throw UsageError("--cfg: required with --weights " + weights +
                     " (it is not a YOLOv5 checkpoint and names no model YAML that exists; pass "
                     "the model YAML, e.g. --cfg yolov5s.yaml)");
  }
}

void write_state_dict(const StateDict& sd, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [k, t] : sd) dict.insert(k, t.detach().cpu().contiguous());
  const std::vector<char> bytes = pickle_save_plain(c10::IValue(dict));
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
}

LoadReport load_state_dict(torch::nn::Module& module, const StateDict& sd,
                           const std::vector<std::string>& exclude) {
  LoadReport r;
  torch::NoGradGuard no_grad;
  StateDict own = state_dict(module);
  r.total = static_cast<int>(own.size());
  std::set<std::string> params;
  for (const auto& p : module.named_parameters(true)) params.insert(p.key());
  for (auto& [name, dst] : own) {
    auto it = sd.find(name);
    if (it == sd.end()) continue;
    bool excluded = false;
    for (const auto& x : exclude) excluded = excluded || name.find(x) != std::string::npos;
    if (excluded) continue;
    if (it->second.sizes() != dst.sizes()) {
      ++r.mismatched;
      continue;
    }
    dst.copy_(it->second);
    ++r.transferred;
    r.parameters += static_cast<int>(params.count(name));
  }
  for (const auto& kv : sd) {
    if (!own.count(kv.first)) ++r.unexpected;
  }
  return r;
}

LoadReport load_weights(torch::nn::Module& module, const std::string& path) {
  return load_weights(module, read_weights_file(path), path);
}

LoadReport load_weights(torch::nn::Module& module, const WeightsFile& file, const std::string& path,
                        const std::vector<std::string>& exclude) {
  const LoadReport r = load_state_dict(module, file.weights, exclude);
  log_info("Transferred " + std::to_string(r.transferred) + "/" + std::to_string(r.total) +
           " items from " + path);
  if (r.mismatched) {
    log_info("  skipped " + std::to_string(r.mismatched) +
             " entries whose shapes differ (e.g. another number of classes)");
  }
  // A class-count change leaves all but Detect's convs; fewer than half means another model.
  const int model_params = static_cast<int>(module.named_parameters(true).size());
  if (r.parameters * 2 < model_params) {
    throw std::runtime_error(path + ": only " + std::to_string(r.parameters) + " of the model's " +
                             std::to_string(model_params) +
                             " parameters match by name and shape: these are weights of another "
                             "architecture; pass the matching --cfg");
  }
  return r;
}

int weights_class_count(const ModelSpec& spec, const StateDict& sd) {
  if (spec.layers.empty()) return 0;
  const std::string head = "model." + std::to_string(spec.layers.size() - 1);
  const auto bias = sd.find(head + (spec.anchor_free ? ".cv3.0.2.bias" : ".m.0.bias"));
  if (bias == sd.end() || bias->second.dim() != 1) return 0;
  const int n = static_cast<int>(bias->second.size(0));
  if (spec.anchor_free) return n;
  const int na = spec.anchors_per_level();
  return na > 0 ? n / na - 5 : 0;
}

void match_anchor_count(ModelSpec& spec, const StateDict& sd) {
  if (spec.layers.empty()) return;
  const auto it = sd.find("model." + std::to_string(spec.layers.size() - 1) + ".anchors");
  if (it == sd.end() || it->second.dim() != 3 || it->second.size(2) != 2) return;
  const int na = static_cast<int>(it->second.size(1));
  if (spec.anchor_free || na < 1 || na == spec.anchors_per_level()) return;
  spec.anchor_count = na;
  spec.anchors.clear();
}

}  // namespace yolo

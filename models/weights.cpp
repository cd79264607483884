#include "models/weights.h"

#include <torch/torch.h>

#include <set>

#include "utils/core/checkpoint.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/log.h"

namespace yolo {

StateDict state_dict(const torch::nn::Module& module) {
  StateDict sd;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) sd[p.key()] = p.value();
  for (const auto& b : module.named_buffers(/*recurse=*/true)) sd[b.key()] = b.value();
  return sd;
}

namespace {

bool to_state_dict(const c10::IValue& v, StateDict& out) {
  if (!v.isGenericDict()) return false;
  for (const auto& kv : v.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) return false;
    out[kv.key().toStringRef()] = kv.value().toTensor();
  }
  return true;
}

}  // namespace

StateDict read_state_dict(const std::string& path) {
  const c10::IValue v = read_pickle_archive(
      path, "weights file",
      "; YOLOv5 .pt files: convert them with scripts/export_yolov5_weights.py; an OrderedDict "
      "state_dict: save dict(model.state_dict()) instead");
  StateDict sd;
  if (to_state_dict(v, sd)) return sd;
  if (v.isGenericDict()) {
    const auto d = v.toGenericDict();
    for (const auto& kv : d) {
      if (kv.key().isString() && kv.key().toStringRef() == "model" &&
          to_state_dict(kv.value(), sd)) {
        return sd;
      }
    }
  }
  throw std::runtime_error(path +
                           ": expected a dict of {name: tensor} (or a checkpoint with a "
                           "'model' dict); got " +
                           v.tagKind());
}

void write_state_dict(const StateDict& sd, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [k, t] : sd) dict.insert(k, t.detach().cpu().contiguous());
  const std::vector<char> bytes = pickle_save_plain(c10::IValue(dict));
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
}

LoadReport load_state_dict(torch::nn::Module& module, const StateDict& sd) {
  LoadReport r;
  torch::NoGradGuard no_grad;
  StateDict own = state_dict(module);
  r.total = static_cast<int>(own.size());
  std::set<std::string> params;
  for (const auto& p : module.named_parameters(true)) params.insert(p.key());
  for (auto& [name, dst] : own) {
    auto it = sd.find(name);
    if (it == sd.end()) continue;
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
  const LoadReport r = load_state_dict(module, read_state_dict(path));
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

}  // namespace yolo

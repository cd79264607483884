#include "utils/eval/model_loader.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "data/dataset_config.h"
#include "models/weights.h"
#include "utils/core/checkpoint.h"
#include "utils/core/errors.h"
#include "utils/core/paths.h"

namespace yolo {

LoadedModel load_model_for_inference(const std::string& weights, const std::string& cfg,
                                     const std::string& data) {
  if (weights.empty()) throw UsageError("--weights: required (a best.pt/last.pt or weights file)");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(weights, ec)) {
    throw UsageError("--weights: file '" + weights + "' not found");
  }
  LoadedModel out;
  StateDict sd;
  bool from_checkpoint = false;
  try {
    Checkpoint ck = load_checkpoint(weights);
    sd = std::move(ck.model);
    from_checkpoint = true;
    if (!ck.opt.empty()) {
      const YAML::Node opt = YAML::Load(ck.opt);
      if (opt["cfg"]) out.cfg = opt["cfg"].as<std::string>();
      if (opt["data"]) out.data = opt["data"].as<std::string>();
      if (opt["single_cls"]) out.single_cls = opt["single_cls"].as<bool>();
    }
  } catch (const std::exception&) {
    sd = read_state_dict(weights);  // a plain {name: tensor} dict; its errors name the file
  }
  if (!cfg.empty()) out.cfg = cfg;
  if (!data.empty()) out.data = data;
  if (out.cfg.empty()) {
    out.cfg = std::filesystem::path(weights).stem().string() + ".yaml";
    try {
      out.cfg = resolve_config(out.cfg, ConfigKind::kModel, "--cfg");
    } catch (const UsageError&) {
      throw UsageError("--cfg: required for " + weights +
                       " (a weights file without training options); pass the model YAML");
    }
  } else if (cfg.empty() && from_checkpoint) {
    // The YAML named by the checkpoint's opt.yaml: when it is gone, say so (not a --cfg error).
    try {
      out.cfg = resolve_config(out.cfg, ConfigKind::kModel, "--cfg");
    } catch (const UsageError&) {
      throw std::runtime_error(weights + ": its model YAML " + out.cfg +
                               " no longer exists; pass --cfg");
    }
  } else {
    out.cfg = resolve_config(out.cfg, ConfigKind::kModel, "--cfg");
  }
  if (!out.data.empty()) {
    const DatasetConfig dc =
        load_dataset_config(resolve_config(out.data, ConfigKind::kData, "--data"));
    out.names = dc.names;
  }
  if (out.single_cls) out.names = {"item"};
  ModelSpec spec = parse_model_spec_file(out.cfg);
  // The class count comes from the weights: the Detect conv bias has na * (5 + nc) entries.
  const int na = static_cast<int>(spec.anchors[0].size() / 2);
  const auto bias = sd.find("model." + std::to_string(spec.layers.size() - 1) + ".m.0.bias");
  int nc = 0;
  if (bias != sd.end() && bias->second.dim() == 1)
    nc = static_cast<int>(bias->second.size(0) / na) - 5;
  if (nc <= 0) nc = out.names.empty() ? spec.nc : static_cast<int>(out.names.size());
  if (out.names.empty()) {
    for (int c = 0; c < nc; ++c) out.names.push_back(std::to_string(c));
  }
  if (static_cast<int>(out.names.size()) != nc) {
    throw std::runtime_error(weights + ": the weights have " + std::to_string(nc) +
                             " classes but the data YAML names " +
                             std::to_string(out.names.size()) + "; pass the matching --data");
  }
  out.model = DetectionModel(std::move(spec), nc);
  const LoadReport r = load_state_dict(*out.model, sd);
  if (r.transferred != r.total) {
    throw std::runtime_error(weights + ": only " + std::to_string(r.transferred) + "/" +
                             std::to_string(r.total) + " entries match the model " + out.cfg +
                             "; pass the matching --cfg");
  }
  return out;
}

}  // namespace yolo

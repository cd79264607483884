#include "utils/eval/model_loader.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "data/dataset_config.h"
#include "models/weights.h"
#include "models/weights_hub.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"

namespace yolo {
namespace {

// A --data whose names differ from the ones the weights carry is said once; the weights' names
// are what the model was trained to find.
void warn_if_renamed(const std::string& weights, const std::vector<std::string>& own,
                     const std::string& data, const std::vector<std::string>& given) {
  if (own == given) return;
  size_t i = 0;
  while (i < own.size() && i < given.size() && own[i] == given[i]) ++i;
  const std::string at = i < own.size() && i < given.size()
                             ? " (class " + std::to_string(i) + ": '" + given[i] + "' there, '" +
                                   own[i] + "' in the weights)"
                             : "";
  log_warn(one_line(data + " names the classes differently from " + weights + at +
                    "; using the names saved in the weights"));
}

// The architecture: --cfg's file, else the model YAML a checkpoint carries, else (older
// checkpoints) the file its options name, else the one the weights' file name names.
// `out_cfg` holds the file the checkpoint's options name ('' for plain weights).
ModelSpec model_spec_for(const std::string& weights, const WeightsFile& wf, const std::string& cfg,
                         std::string& out_cfg) {
  if (!cfg.empty()) {
    out_cfg = resolve_config(cfg, ConfigKind::kModel, "--cfg");
    return parse_model_spec_file(out_cfg);
  }
  if (!wf.model_yaml.empty()) {
    if (out_cfg.empty()) out_cfg = weights + " (its model YAML)";
    return parse_model_spec_string(wf.model_yaml, weights + " (its model YAML)");
  }
  if (out_cfg.empty()) {
    out_cfg = std::filesystem::path(weights).stem().string() + ".yaml";
    try {
      out_cfg = resolve_config(out_cfg, ConfigKind::kModel, "--cfg");
    } catch (const UsageError&) {
      throw UsageError("--cfg: required for " + weights +
                       " (a weights file without training options); pass the model YAML");
    }
  } else {
    // The YAML named by the checkpoint's opt.yaml: when it is gone, say so (not a --cfg error).
    try {
      out_cfg = resolve_config(out_cfg, ConfigKind::kModel, "--cfg");
    } catch (const UsageError&) {
      throw std::runtime_error(weights + ": its model YAML " + out_cfg +
                               " no longer exists; pass --cfg");
    }
  }
  return parse_model_spec_file(out_cfg);
}

// A YOLOv5 checkpoint: its EMA (else its model), architecture and class names. --cfg replaces
// the architecture; --data must name as many classes as the weights detect.
LoadedModel load_yolov5_for_inference(const std::string& weights, const Yolov5Checkpoint& ck,
                                      const std::string& cfg, const std::string& data) {
  LoadedModel out;
  out.data = data;
  ModelSpec spec = cfg.empty()
                       ? parse_model_spec_string(ck.model_yaml, weights + " (its model yaml)")
                       : parse_model_spec_file(resolve_config(cfg, ConfigKind::kModel, "--cfg"));
  out.cfg = cfg.empty() ? spec.source : resolve_config(cfg, ConfigKind::kModel, "--cfg");
  const StateDict& sd = ck.inference_weights();
  match_anchor_count(spec, sd);
  const int from_weights = weights_class_count(spec, sd);
  const int nc = from_weights > 0 ? from_weights : ck.nc;
  out.names = ck.names;
  if (!data.empty()) {
    const DatasetConfig dc = load_dataset_config(resolve_config(data, ConfigKind::kData, "--data"));
    if (dc.nc != nc) {
      throw std::runtime_error(weights + ": the weights detect " + std::to_string(nc) +
                               " classes but " + data + " names " + std::to_string(dc.nc) +
                               "; pass the --data the model was trained on");
    }
    if (out.names.empty()) out.names = dc.names;
    if (static_cast<int>(out.names.size()) == nc)
      warn_if_renamed(weights, out.names, data, dc.names);
  }
  if (static_cast<int>(out.names.size()) != nc) {
    out.names.clear();
    for (int c = 0; c < nc; ++c) out.names.push_back("class" + std::to_string(c));
  }
  out.model = DetectionModel(std::move(spec), nc);
  const LoadReport r = load_state_dict(*out.model, sd);
  if (r.transferred != r.total) {
    throw std::runtime_error(weights + ": only " + std::to_string(r.transferred) + "/" +
                             std::to_string(r.total) + " entries match the model " + out.cfg +
                             (cfg.empty() ? " it describes" : "; pass the matching --cfg"));
  }
  return out;
}

}  // namespace

LoadedModel load_model_for_inference(const std::string& named, const std::string& cfg,
                                     const std::string& data) {
  if (named.empty()) throw UsageError("--weights: required (a best.pt/last.pt or weights file)");
  const std::string weights = resolve_weights(named);  // a released name is downloaded
  if (const std::string why = file_problem(weights); !why.empty()) {
    throw UsageError("--weights: '" + weights + "' " + why);
  }
  LoadedModel out;
  WeightsFile wf = read_weights_file(weights);
  StateDict sd = std::move(wf.weights);
  if (!wf.opt_yaml.empty()) {  // a checkpoint of this trainer
    try {
      const YAML::Node opt = YAML::Load(wf.opt_yaml);
      if (opt["cfg"]) out.cfg = opt["cfg"].as<std::string>();
      if (opt["data"]) out.data = opt["data"].as<std::string>();
      if (opt["single_cls"]) out.single_cls = opt["single_cls"].as<bool>();
    } catch (const YAML::Exception& e) {
      throw std::runtime_error(weights + ": key 'opt': not the options of a run (" + e.msg + ")");
    }
  }
  if (wf.yolov5) {
    LoadedModel y = load_yolov5_for_inference(weights, *wf.yolov5, cfg, data);
    y.file = weights;
    return y;
  }
  ModelSpec spec = model_spec_for(weights, wf, cfg, out.cfg);
  // The names the checkpoint carries come first; older checkpoints name their data YAML.
  const std::string data_yaml = data.empty() ? (wf.names.empty() ? out.data : "") : data;
  if (!data.empty()) out.data = data;
  std::vector<std::string> data_names;
  if (!data_yaml.empty()) {
    std::string path;
    try {
      path = resolve_config(data_yaml, ConfigKind::kData, "--data");
    } catch (const UsageError&) {
      if (!data.empty()) throw;
      throw std::runtime_error(weights + ": its data YAML " + data_yaml +
                               " (for the class names) no longer exists; pass --data");
    }
    data_names = load_dataset_config(path).names;
  }
  if (out.single_cls) data_names = {"item"};
  match_anchor_count(spec, sd);
  // The class count comes from the weights' Detect head.
  int nc = weights_class_count(spec, sd);
  if (nc <= 0) {
    nc = !wf.names.empty()     ? static_cast<int>(wf.names.size())
         : !data_names.empty() ? static_cast<int>(data_names.size())
                               : spec.nc;
  }
  if (!wf.names.empty() && static_cast<int>(wf.names.size()) != nc) {
    throw std::runtime_error(weights + ": key 'names' lists " + std::to_string(wf.names.size()) +
                             " classes but the weights detect " + std::to_string(nc));
  }
  if (!data_names.empty() && static_cast<int>(data_names.size()) != nc) {
    throw std::runtime_error(weights + ": the weights have " + std::to_string(nc) +
                             " classes but the data YAML names " +
                             std::to_string(data_names.size()) + "; pass the matching --data");
  }
  out.names = wf.names.empty() ? data_names : wf.names;
  if (!wf.names.empty() && !data_names.empty())
    warn_if_renamed(weights, wf.names, data, data_names);
  if (out.names.empty()) {
    for (int c = 0; c < nc; ++c) out.names.push_back(std::to_string(c));
  }
  out.model = DetectionModel(std::move(spec), nc);
  const LoadReport r = load_state_dict(*out.model, sd);
  if (r.transferred != r.total) {
    throw std::runtime_error(weights + ": only " + std::to_string(r.transferred) + "/" +
                             std::to_string(r.total) + " entries match the model " + out.cfg +
                             "; pass the matching --cfg");
  }
  out.model->head().select_for_inference(false);  // one head: YOLO26's one-to-many by default
  out.file = weights;
  return out;
}

}  // namespace yolo

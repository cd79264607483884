#pragma once
// Builds a model for val/detect from a weights file: a training checkpoint (its opt.yaml text
// names the model YAML, data YAML and single-class mode) or a plain state dict (then --cfg, or the
// weights' file name, names the model YAML).
#include <string>
#include <vector>

#include "models/yolo.h"

namespace yolo {

struct LoadedModel {
  DetectionModel model{nullptr};
  std::string cfg;   // model YAML used
  std::string data;  // data YAML from the checkpoint ('' for a plain state dict)
  bool single_cls = false;
  std::vector<std::string> names;  // from the data YAML when known, else class indices
  std::string file;  // the file read: the download cache's for a released name (yolov5s.pt)
};

// `cfg` / `data` override what the checkpoint says when not empty. Throws UsageError for a
// missing file and std::runtime_error for unreadable or mismatching weights.
LoadedModel load_model_for_inference(const std::string& weights, const std::string& cfg,
                                     const std::string& data);

}  // namespace yolo

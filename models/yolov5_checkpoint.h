#pragma once
// YOLOv5 v7.0's own .pt files (released weights, a run's best.pt/last.pt, stripped or not), and
// Ultralytics 8.x's of the same layout (YOLOv8, YOLO11): a torch.save zip whose `model` (and
// `ema`) is a pickled DetectionModel. They are read with the
// restricted unpickler (models/unpickler.h): the pickled classes become inert records and
// only these may appear: YOLOv5's model classes (models.yolo.*, models.common.* as a clone of the
// repository pickles them; yolov5.models.yolo.*, yolov5.models.common.* as the PyPI package
// does), Ultralytics' (ultralytics.nn.tasks.*, ultralytics.nn.modules.*, its argument namespace),
// torch.nn modules, torch.Size, PyTorch's tensor/parameter/storage rebuild functions, OrderedDict
// and set, numpy arrays and scalars (best_fitness of an unstripped last.pt), pathlib paths. Any
// other global is refused, naming the file and the class; nothing from the file is ever run.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/unpickler.h"

namespace yolo {

struct Yolov5Checkpoint {
  using Weights = std::map<std::string, at::Tensor>;
  Weights model;           // `model`'s state_dict in float32: what YOLOv5's train.py fine-tunes
  Weights ema;             // `ema`'s (an unstripped last.pt); empty when the file has none
  std::string model_yaml;  // DetectionModel.yaml as YAML text: the architecture
  std::vector<std::string> names;  // class names (a list or {index: name} in the file)
  int nc = 0;
  std::vector<double> stride;
  int64_t epoch = -1;
  bool has_optimizer = false;  // YOLOv5's optimizer state (a run interrupted mid-training)
  std::string model_class;     // as pickled, e.g. models.yolo.DetectionModel

  // What YOLOv5's attempt_load (val.py, detect.py) uses: the EMA when present, else `model`.
  const Weights& inference_weights() const { return ema.empty() ? model : ema; }
};

// The globals a YOLOv5 checkpoint may name beyond the unpickler's own rebuild set.
bool is_yolov5_checkpoint_global(const std::string& qualified_name);

// `root` (an unpickled file) as a YOLOv5 checkpoint: nullopt unless it is a dict whose `model` or
// `ema` entry is a pickled model object. Throws std::runtime_error naming `path` when it is one
// but malformed (not a DetectionModel, no yaml, modules nested absurdly deep, ...).
std::optional<Yolov5Checkpoint> yolov5_checkpoint(const PyValue& root, const std::string& path);

// DetectionModel.yaml (a pickled dict) as YAML text that parse_model_spec_string reads.
std::string yaml_text_of(const PyValue& yaml, const std::string& path);

}  // namespace yolo

#pragma once
// Weights as YOLOv5 state_dicts: a zip-format pickle of {name: tensor}, as written by Python's
// `torch.save(dict(model.state_dict()), f)` and read back by `torch.load`. Reading also takes this
// trainer's checkpoints and YOLOv5's own .pt files (models/yolov5_checkpoint.h).
#include <torch/nn/module.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/yolov5_checkpoint.h"

namespace yolo {

using StateDict = std::map<std::string, torch::Tensor>;

// Every parameter and buffer of `module` by its dotted name.
StateDict state_dict(const torch::nn::Module& module);

struct WeightsFile {
  StateDict weights;     // what training starts from (float32 for YOLOv5's)
  std::string opt_yaml;  // this trainer's checkpoints: the run's opt.yaml text
  // This trainer's checkpoints (empty in files written before they carried them): the model
  // YAML's text and the classes, so that the file alone says what it detects.
  std::string model_yaml;
  std::vector<std::string> names;
  std::optional<Yolov5Checkpoint> yolov5;  // set for YOLOv5's own .pt files
};

// Reads a weights file: a plain {name: tensor} dict (or an OrderedDict state_dict), a checkpoint
// dict whose "model" entry is one (this trainer's), or a YOLOv5 checkpoint (the `model` entry's
// state_dict, as YOLOv5's train.py fine-tunes from). Nothing in the file is executed. Throws
// std::runtime_error naming the file when it is missing, not a zip pickle, truncated, names a
// class outside the allow-list, or holds something else.
WeightsFile read_weights_file(const std::string& path);
StateDict read_state_dict(const std::string& path);

// Whether `path` is a YOLOv5 checkpoint (false for anything else, readable or not).
bool is_yolov5_checkpoint(const std::string& path);

// The model YAML for `--weights W` without --cfg: "" when W is a YOLOv5 checkpoint (the
// architecture is in the file), the run's model YAML for a checkpoint of this trainer (its
// opt.yaml names it) while that exists, else the one W's stem names (yolov5s.pt ->
// yolov5s.yaml). Throws UsageError when none is there.
std::string model_cfg_for_weights(const WeightsFile& file, const std::string& weights);

// When `sd`'s Detect anchors (model.<last>.anchors, levels x na x 2) hold another number of
// anchors per level than `spec` lists (a run trained with a hyp file's `anchors: N`), makes
// `spec` build that many; the weights then carry the fitted values.
void match_anchor_count(ModelSpec& spec, const StateDict& sd);

// The number of classes a state_dict of `spec`'s architecture detects, read from its Detect head's
// class outputs (YOLOv5's m.0.bias, na * (5 + nc) entries; an anchor-free head's cv3.0.2.bias, nc
// entries); 0 when they are not there.
int weights_class_count(const ModelSpec& spec, const StateDict& sd);

// Writes `sd` atomically; the file loads with Python's torch.load.
void write_state_dict(const StateDict& sd, const std::string& path);

struct LoadReport {
  int transferred = 0;  // entries copied
  int total = 0;        // entries in the model
  int mismatched = 0;   // same name, other shape (e.g. another nc): skipped
  int unexpected = 0;   // names in the file the model lacks
  int parameters = 0;   // transferred entries that are parameters (not buffers)
};

// YOLOv5's intersect_dicts: copies entries whose name and shape match, skips the rest and those
// whose name contains a string in `exclude`.
LoadReport load_state_dict(torch::nn::Module& module, const StateDict& sd,
                           const std::vector<std::string>& exclude = {});

// load + log "Transferred a/b items from FILE". Throws when fewer than half of the model's
// parameters match (weights of another architecture).
LoadReport load_weights(torch::nn::Module& module, const WeightsFile& file, const std::string& path,
                        const std::vector<std::string>& exclude = {});
LoadReport load_weights(torch::nn::Module& module, const std::string& path);

}  // namespace yolo

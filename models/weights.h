#pragma once
// Weights as YOLOv5 state_dicts: a zip-format pickle of {name: tensor}, as written by Python's
// `torch.save(dict(model.state_dict()), f)` and read back by `torch.load`.
#include <torch/nn/module.h>

#include <map>
#include <string>

namespace yolo {

using StateDict = std::map<std::string, torch::Tensor>;

// Every parameter and buffer of `module` by its dotted name.
StateDict state_dict(const torch::nn::Module& module);

// Reads a weights file. Accepts a plain {name: tensor} dict, or a checkpoint dict whose "model"
// entry is one. Throws std::runtime_error naming the file when it is missing, not a zip pickle,
// truncated, or holds something else.
StateDict read_state_dict(const std::string& path);

// Writes `sd` atomically; the file loads with Python's torch.load.
void write_state_dict(const StateDict& sd, const std::string& path);

struct LoadReport {
  int transferred = 0;  // entries copied
  int total = 0;        // entries in the model
  int mismatched = 0;   // same name, other shape (e.g. another nc): skipped
  int unexpected = 0;   // names in the file the model lacks
  int parameters = 0;   // transferred entries that are parameters (not buffers)
};

// YOLOv5's intersect_dicts: copies entries whose name and shape match, skips the rest.
LoadReport load_state_dict(torch::nn::Module& module, const StateDict& sd);

// read + load + log "Transferred a/b items from FILE". Throws when fewer than half of the
// model's parameters match (weights of another architecture).
LoadReport load_weights(torch::nn::Module& module, const std::string& path);

}  // namespace yolo

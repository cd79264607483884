#pragma once
// A detection model built from a model YAML: YOLOv5's (anchor-based) or Ultralytics' anchor-free
// YOLOv8, YOLO11 and YOLO26. Submodules are registered as `model.<i>` so parameter and buffer
// names equal the reference's state_dict() keys (model.0.conv.weight, ..., model.24.anchors or
// model.22.dfl.conv.weight).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <functional>
#include <string>
#include <vector>

#include "models/detect.h"
#include "models/head.h"
#include "models/model_config.h"

namespace yolo {

struct ModelOutput {
  // Per level: (bs, na, ny, nx, 5+nc) for YOLOv5's head, (bs, 4*reg_max+nc, ny, nx) anchor-free.
  std::vector<torch::Tensor> raw;
  torch::Tensor pred;  // eval mode only: decoded (bs, N, 5+nc)
};

class DetectionModelImpl : public torch::nn::Module {
 public:
  // `nc` > 0 overrides the YAML's class count (the data YAML's nc, as YOLOv5 does).
  explicit DetectionModelImpl(ModelSpec spec, int nc = 0, int ch = 3);

  ModelOutput forward(const torch::Tensor& x);
  // Test-time augmentation (eval mode), as YOLOv5's forward(x, augment=True): the images at
  // scales 1, 0.83 (flipped left-right) and 0.67, padded to the largest stride, predictions mapped
  // back to x's pixels and concatenated (the largest-object level of the first and the
  // smallest-object level of the last left out).
  torch::Tensor forward_augment(const torch::Tensor& x);
  // The raw maps only, in either mode.
  std::vector<torch::Tensor> forward_raw(const torch::Tensor& x);

  // Folds every BatchNorm into its convolution for inference.
  void fuse();

  // YOLOv5's head and its anchors; null for an anchor-free model.
  Detect detect() const { return detect_; }
  DetectHead& head() const { return *head_; }
  // The head module (its parameters, e.g. for the family's loss).
  std::shared_ptr<torch::nn::Module> head_module() const { return head_module_; }
  // Layer i's inputs: absolute layer indices, -1 for the model's input.
  const std::vector<int>& layer_inputs(size_t i) const { return layers_.at(i).from; }
  const ModelSpec& spec() const { return spec_; }
  int nc() const { return head_->num_classes(); }
  std::vector<int> strides() const;
  int max_stride() const;
  int64_t num_parameters() const;
  // YOLOv5-style layer table and totals.
  std::string summary() const;

  torch::nn::ModuleList model{nullptr};

 private:
  struct Layer {
    std::vector<int> from;  // absolute indices; -1 = model input
    std::function<torch::Tensor(const std::vector<torch::Tensor>&)> run;
    bool is_detect = false;
  };
  void set_strides(int in_ch);

  std::vector<Layer> layers_;
  std::vector<bool> keep_;  // outputs later layers read
  Detect detect_{nullptr};
  std::shared_ptr<DetectHead> head_;
  std::shared_ptr<torch::nn::Module> head_module_;
  ModelSpec spec_;
  std::string table_;
};
TORCH_MODULE(DetectionModel);

// Puts every 4-D parameter and buffer in channels-last (NHWC) memory: convolutions then run on
// NHWC activations, which oneDNN on the CPU computes faster. Names, shapes and values are
// unchanged; parameters stay the same tensors (optimizers keep their references).
void to_channels_last(torch::nn::Module& module);

// Builds from a YAML file (parse errors name the file and line).
DetectionModel build_model(const std::string& cfg_path, int nc = 0);

}  // namespace yolo

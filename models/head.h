#pragma once
// What the model builder and the model-family seam need of a detection head. Two heads implement
// it: YOLOv5's anchor-based Detect (models/detect.h) and Ultralytics' anchor-free one
// (models/anchor_free_detect.h). Everything after the head (loss, NMS, export layout) is chosen
// by the family the model YAML names (utils/eval/model_family.h), never by testing the head type.
#include <ATen/core/Tensor.h>

#include <stdexcept>
#include <vector>

namespace yolo {

class DetectHead {
 public:
  virtual ~DetectHead() = default;
  // Raw maps per level, as training and the loss read them.
  virtual std::vector<at::Tensor> forward_levels(std::vector<at::Tensor> x) = 0;
  // Decoded boxes (bs, N, 5+nc): xywh in input pixels, an objectness (1 for a head without
  // one) and class scores, the layout NMS and test-time augmentation read.
  virtual at::Tensor decode(const std::vector<at::Tensor>& raw) = 0;
  // Strides in pixels per level, from the builder's forward pass; then the bias priors.
  virtual void set_strides(const std::vector<float>& strides) = 0;
  virtual void initialize_biases() = 0;
  virtual int num_classes() const = 0;
  virtual int num_levels() const = 0;
  virtual at::Tensor level_strides() const = 0;  // (nl) float, CPU
  // Inference runs one head: the usual one, or the one-to-one head whose top-k output needs no
  // NMS (end2end), which only YOLO26's has.
  virtual bool has_end2end() const { return false; }
  virtual void select_for_inference(bool end2end) {
    if (end2end) throw std::runtime_error("this model has no one-to-one (end-to-end) head");
  }
};

}  // namespace yolo

#pragma once
// YOLOv5's Detect head: one 1x1 conv per level producing na*(5+nc) channels. Anchors are a buffer
// in stride units (as YOLOv5 keeps them); strides are set by the model builder.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <vector>

#include "models/head.h"

namespace yolo {

class DetectImpl : public torch::nn::Module, public DetectHead {
 public:
  DetectImpl(int nc, const std::vector<std::vector<double>>& anchors, const std::vector<int>& ch);

  std::vector<torch::Tensor> forward_levels(std::vector<torch::Tensor> x) override {
    return forward(std::move(x));
  }
  // Also YOLOv5's check_anchor_order (anchor areas must grow with stride) and the anchors put in
  // stride units.
  void set_strides(const std::vector<float>& strides) override;
  int num_classes() const override { return nc; }
  int num_levels() const override { return nl; }
  torch::Tensor level_strides() const override { return stride; }

  // Raw maps, each (bs, na, ny, nx, 5+nc): what training and the loss use.
  std::vector<torch::Tensor> forward(std::vector<torch::Tensor> x);
  // Decodes raw maps into (bs, N, 5+nc) boxes in input pixels (xywh, obj, class scores).
  torch::Tensor decode(const std::vector<torch::Tensor>& raw) override;

  // YOLOv5's _initialize_biases: objectness prior of 8 objects per 640 image, uniform classes.
  void initialize_biases() override;

  int nc, no, nl, na;
  torch::Tensor anchors;  // buffer (nl, na, 2), stride units
  torch::Tensor stride;   // (nl), pixels per cell; not part of the state_dict (as YOLOv5)
  torch::nn::ModuleList m{nullptr};

 private:
  std::vector<torch::Tensor> grid_, anchor_grid_;
};
TORCH_MODULE(Detect);

}  // namespace yolo

#pragma once
// Ultralytics' anchor-free Detect head (YOLOv8, YOLO11): per level a box branch `cv2` (two 3x3
// Convs, then 4*reg_max distance bins) and a class branch `cv3` (two 3x3 Convs in YOLOv8's
// "legacy" form; a depthwise 3x3 and a 1x1 Conv twice in YOLO11's), then a 1x1 to nc logits.
// Boxes are the anchor point (each cell's centre) minus and plus the DFL expectations of the
// left/top/right/bottom distances (the raw distances when reg_max is 1), times the stride.
// YOLO26's end-to-end head (end2end) adds `one2one_cv2` and `one2one_cv3`, copies of the two
// branches whose top-k output needs no NMS; which branches run is chosen with select().
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <vector>

#include "models/csp_attention.h"
#include "models/head.h"

namespace yolo {

class AnchorFreeDetectImpl : public torch::nn::Module, public DetectHead {
 public:
  AnchorFreeDetectImpl(int nc, int reg_max, bool legacy, const std::vector<int>& ch,
                       bool end2end = false);

  // Which branches forward_levels runs: the one-to-many ones (the default of val, detect and
  // export, as Ultralytics 8.4.190), the one-to-one ones (end-to-end inference, no NMS), or both,
  // one-to-many levels first (what YOLO26's loss reads: the default of an end2end head). In
  // training the one-to-one branches see detached features: their loss stops at the head.
  enum class Heads { kOne2Many, kOne2One, kBoth };

  // Per level (bs, 4*reg_max + nc, ny, nx): distance-bin logits, then class logits, from the
  // selected branches (2 x levels maps for Heads::kBoth).
  std::vector<torch::Tensor> forward_levels(std::vector<torch::Tensor> x) override;
  // (bs, N, 5+nc): xywh, 1 (no objectness), sigmoid class scores, from the first `nl` maps of
  // `raw` (with both heads, the one-to-many head's).
  torch::Tensor decode(const std::vector<torch::Tensor>& raw) override;
  // Ultralytics' layout (bs, 4+nc, N): xywh and class scores (what export writes).
  torch::Tensor decode_channels_first(const std::vector<torch::Tensor>& raw);
  void set_strides(const std::vector<float>& strides) override;
  // Box logits 2.0; class logits log(5 / nc / (640 / stride)^2) (0.01 objects per 640 image).
  void initialize_biases() override;
  int num_classes() const override { return nc; }
  int num_levels() const override { return nl; }
  torch::Tensor level_strides() const override { return stride; }

  bool has_end2end() const override { return has_one2one(); }
  void select_for_inference(bool end2end) override {
    select(end2end ? Heads::kOne2One : Heads::kOne2Many);
  }
  bool has_one2one() const { return !one2one_cv2.is_empty(); }
  // kOne2One and kBoth need has_one2one().
  void select(Heads heads);
  Heads selected() const { return heads_; }

  int nc, nl, reg_max, no;
  torch::Tensor stride;  // (nl), pixels per cell; not part of the state_dict (as Ultralytics)
  torch::nn::ModuleList cv2{nullptr}, cv3{nullptr};
  DFL dfl{nullptr};                                                  // reg_max > 1
  torch::nn::ModuleList one2one_cv2{nullptr}, one2one_cv3{nullptr};  // end2end

 private:
  // Anchor points (2, N) in cells + 0.5 and strides (1, N) for the levels' sizes, cached.
  void update_anchors(const std::vector<torch::Tensor>& raw);
  std::vector<int64_t> shape_;
  torch::Tensor anchors_, strides_;
  Heads heads_ = Heads::kOne2Many;
};
TORCH_MODULE(AnchorFreeDetect);

// Anchor points (N, 2) at cell centres and their strides (N, 1), level by level, row-major, for
// maps of the given (ny, nx) sizes (Ultralytics' make_anchors).
std::pair<torch::Tensor, torch::Tensor> make_anchor_points(
    const std::vector<std::array<int64_t, 2>>& sizes, const std::vector<float>& strides,
    const torch::TensorOptions& options);

}  // namespace yolo

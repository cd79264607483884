#pragma once
// Ultralytics' v8DetectionLoss (YOLOv8, YOLO11, and each branch of YOLO26's): task-aligned
// assignment, then BCE over every class logit against the soft targets, CIoU box loss and
// distribution focal loss (L1 on the distances when reg_max is 1) over the assigned anchors, each
// weighted by the anchor's target score and divided by the sum of target scores. Gains box 7.5,
// cls 0.5, dfl 1.5 (the hyp file's box, cls and dfl).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

#include "utils/eval/loss.h"
#include "utils/eval/task_aligned_assigner.h"

namespace yolo {

struct AnchorFreeGains {
  double box = 7.5, cls = 0.5, dfl = 1.5;
};

class AnchorFreeLoss : public DetectionLoss {
 public:
  // strides: pixels per cell of each level; reg_max: distance bins per box side.
  AnchorFreeLoss(const AnchorFreeGains& gains, int nc, int reg_max, std::vector<float> strides,
                 TalOptions tal = {});

  // p: per level (bs, 4*reg_max + nc, ny, nx); targets (n, 6): image, class, cx, cy, w, h
  // (normalised), grouped by image, on the host (as the loader gives them; a device tensor costs
  // one read back).
  // items: box, cls, dfl or l1 (detached); loss: their sum times the batch size.
  LossResult operator()(const std::vector<at::Tensor>& p, const at::Tensor& targets) const override;

  // What the loss compares against: the assignment for a batch (for tests and tools).
  struct Parts {
    TalTargets assigned;
    at::Tensor pred_bboxes;  // (bs, A, 4) xyxy in cells
    at::Tensor anchors;      // (A, 2) in cells
    at::Tensor strides;      // (A, 1)
  };
  Parts assign(const std::vector<at::Tensor>& p, const at::Tensor& targets) const;

  // The targets as the loss reads them: (bs, n_max, 5) class, cx, cy, w, h (normalised) per
  // image, zero padded, built on the host from the host rows and copied to `device` once
  // (asynchronously, from page-locked memory on CUDA). Any image size and both of YOLO26's
  // branches read the same table.
  at::Tensor prepare_targets(const at::Tensor& targets, int64_t bs,
                             const c10::Device& device) const;
  // operator() on targets prepare_targets made.
  LossResult with_prepared(const std::vector<at::Tensor>& p, const at::Tensor& prepared) const;

 private:
  AnchorFreeGains g_;
  int nc_, reg_max_;
  std::vector<float> strides_;
  TalOptions tal_;
};

}  // namespace yolo

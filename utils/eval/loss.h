#pragma once
// YOLOv5 v7.0's ComputeLoss: target assignment across anchors and neighbouring cells, CIoU box
// loss, objectness BCE against the (detached) IoU, class BCE with label smoothing, optional focal
// loss, per-level objectness balance. Takes the Detect head's anchors as a plain tensor, so the
// loss does not depend on models/.
#include <ATen/core/Tensor.h>

#include <array>
#include <vector>

namespace yolo {

struct LossGains {
  double box = 0.05, obj = 1.0, cls = 0.5;  // already scaled (utils/engine/hyp.h scale_loss_gains)
  double cls_pw = 1.0, obj_pw = 1.0;
  double anchor_t = 4.0;
  double fl_gamma = 0.0;
  double label_smoothing = 0.0;
};

// CIoU of (n, 4) xywh boxes, row by row -> (n).
at::Tensor bbox_ciou(const at::Tensor& box1, const at::Tensor& box2, double eps = 1e-7);

struct LossTargets {
  std::vector<at::Tensor> tcls, tbox, anchors;     // per level
  std::vector<std::array<at::Tensor, 4>> indices;  // per level: image, anchor, gj, gi
  // Dense form only: per level, 1 for an assigned candidate and 0 for one YOLOv5 drops. Empty in
  // the compact form, which holds the assigned candidates alone.
  std::vector<at::Tensor> weights;
};

struct LossResult {
  at::Tensor loss;   // (1): (lbox + lobj + lcls) * batch size
  at::Tensor items;  // (3): lbox, lobj, lcls, detached
};

// A model family's training loss (utils/eval/model_family.h makes the right one).
class DetectionLoss {
 public:
  virtual ~DetectionLoss() = default;
  // p: the head's raw maps; targets (n, 6): image, class, cx, cy, w, h (normalised), on the host
  // or on p's device.
  virtual LossResult operator()(const std::vector<at::Tensor>& p,
                                const at::Tensor& targets) const = 0;
  // Called before each epoch (0-based, of `epochs`) by the trainer, and on resume: for a loss
  // whose weighting follows the schedule (YOLO26's).
  virtual void set_epoch(int /*epoch*/, int /*epochs*/) {}
};

class ComputeLoss : public DetectionLoss {
 public:
  // anchors: (nl, na, 2) in stride units, as the Detect head keeps them.
  ComputeLoss(const LossGains& gains, int nc, const at::Tensor& anchors);

  // p: raw maps (bs, na, ny, nx, 5+nc) per level; targets (n, 6): image, class, cx, cy, w, h
  // (normalised). On an accelerator the dense form runs (the same loss, no host synchronisation);
  // on the CPU the compact one, which touches fewer elements. `dense` forces either.
  LossResult operator()(const std::vector<at::Tensor>& p, const at::Tensor& targets) const override;
  LossResult operator()(const std::vector<at::Tensor>& p, const at::Tensor& targets,
                        bool dense) const;
  // YOLOv5's assignment: the compact form keeps the assigned candidates (its sizes depend on the
  // data, so a GPU must report them to the host); the dense form keeps every candidate (5
  // neighbour cells x anchors x targets per level, fixed by the batch) with a 0/1 weight.
  LossTargets build_targets(const std::vector<at::Tensor>& p, const at::Tensor& targets) const;
  LossTargets build_dense_targets(const std::vector<at::Tensor>& p,
                                  const at::Tensor& targets) const;

 private:
  at::Tensor bce(const at::Tensor& logits, const at::Tensor& target, double pos_weight) const;
  // Element-wise BCE (with the focal term when fl_gamma > 0), not reduced.
  at::Tensor bce_terms(const at::Tensor& logits, const at::Tensor& target, double pos_weight) const;
  LossResult dense_loss(const std::vector<at::Tensor>& p, const at::Tensor& targets) const;
  at::Tensor assigned_ciou(const at::Tensor& ps, const at::Tensor& anchors,
                           const at::Tensor& tbox) const;
  at::Tensor class_targets(const at::Tensor& pcls, const at::Tensor& tcls) const;
  LossResult total(at::Tensor lbox, at::Tensor lobj, at::Tensor lcls, int64_t bs) const;
  LossGains g_;
  int nc_, nl_, na_;
  at::Tensor anchors_;
  std::vector<double> balance_;
};

}  // namespace yolo

#pragma once
// Ultralytics' TaskAlignedAssigner (YOLOv8, YOLO11, YOLO26): for each ground-truth box the top-k
// anchors by score^alpha * CIoU^beta among those whose centre lies inside the box (a side shorter
// than the middle stride widened to it first), an anchor picked twice in one box's list dropped,
// an anchor claimed by several boxes given to the one it overlaps most, optionally only the best
// topk2 of each box's anchors kept, and soft class targets align * max IoU / max align per box.
// Dense tensors throughout: no host reads, no per-box loops.
#include <ATen/core/Tensor.h>

namespace yolo {

struct TalOptions {
  int topk = 10;
  // A second, narrower pass after conflicts are resolved: each box keeps its topk2 best anchors
  // (YOLO26's one-to-one head: 1). 0 keeps all topk.
  int topk2 = 0;
  double alpha = 0.5, beta = 6.0;
  double widen_to = 16;  // stride[1]: boxes narrower or shorter are widened to it for candidates
  double eps = 1e-9;
  // Every box against every anchor, masked (what runs on an accelerator: no host read), also on
  // the CPU, which otherwise scores the candidate pairs alone. Both give the same assignment.
  bool dense = false;
};

struct TalTargets {
  at::Tensor labels;         // (bs, A) long
  at::Tensor bboxes;         // (bs, A, 4) xyxy pixels (meaningful where fg)
  at::Tensor scores;         // (bs, A, nc) float soft targets, 0 off the foreground
  at::Tensor fg;             // (bs, A) bool
  at::Tensor target_gt_idx;  // (bs, A) long: the box of each anchor within its image
};

// pd_scores (bs, A, nc) probabilities; pd_bboxes (bs, A, 4) xyxy pixels; anchors (A, 2) pixels;
// gt_labels (bs, n, 1); gt_bboxes (bs, n, 4) xyxy pixels; mask_gt (bs, n, 1), 1 for a real box
// (rows past an image's boxes are padding).
TalTargets task_aligned_assign(const at::Tensor& pd_scores, const at::Tensor& pd_bboxes,
                               const at::Tensor& anchors, const at::Tensor& gt_labels,
                               const at::Tensor& gt_bboxes, const at::Tensor& mask_gt,
                               const TalOptions& o);

// CIoU of xyxy boxes broadcast over the leading dimensions (..., 4) -> (...); heights get `eps`
// as Ultralytics' bbox_iou(xywh=False, CIoU=True).
at::Tensor bbox_ciou_xyxy(const at::Tensor& box1, const at::Tensor& box2, double eps = 1e-7);

}  // namespace yolo

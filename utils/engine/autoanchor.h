#pragma once
// YOLOv5 v7.0 AutoAnchor (utils/autoanchor.py): how well the Detect head's anchors fit the
// dataset's boxes (best possible recall), and k-means + genetic evolution of new anchors when they
// fit poorly. All sizes are in pixels at the training image size; everything is deterministic for
// a given seed.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace yolo {

struct AnchorFit {
  double bpr;  // best possible recall: fraction of boxes with some anchor within ratio thr
  double aat;  // anchors above threshold: mean number of anchors within thr per box
};

// YOLOv5's metric: with x = min(r, 1/r) over w and h for r = wh / anchor, a box is matched by an
// anchor when x > 1/thr. anchors_px (k, 2), wh (n, 2). No boxes gives {0, 0}.
AnchorFit anchor_metric(const at::Tensor& anchors_px, const at::Tensor& wh, double thr);

// YOLOv5's kmean_anchors: `n` anchors for the boxes `wh` (n_boxes, 2) in pixels. Boxes smaller
// than 2 px on both sides are left out (a warning counts those under 3 px); k-means on the
// whitened sizes (scipy.cluster.vq.kmeans: 30 seeded restarts, best distortion kept) falls back to
// a random init when it cannot give `n` centres; then `gen` generations of mutation (probability
// 0.9, sigma 0.1) keep a change when it raises the fitness mean(best * (best > 1/thr)).
// Returns (n, 2) float, sorted by area ascending. Throws std::invalid_argument for n < 1 or a
// badly shaped `wh`.
at::Tensor kmean_anchors(const at::Tensor& wh, int n, int img_size, double thr, int gen,
                         uint64_t seed);

struct AutoAnchorResult {
  double bpr_before = 0;
  double bpr_after = 0;  // equals bpr_before unless the anchors were replaced
  bool replaced = false;
  at::Tensor anchors_px;  // (nl, na, 2) in pixels, the input's dtype and device
  std::string message;    // YOLOv5's "AutoAnchor: ..." lines, for the caller to log
};

// YOLOv5's check_anchors: image sizes scaled so the long side is `imgsz`, times a seeded random
// scale in [0.9, 1.1) per image, times the normalised label sizes give the boxes; when the BPR of
// `anchors_px` (nl, na, 2, pixels) is <= 0.98, kmean_anchors(nl * na, gen 1000) runs and its
// anchors replace the old ones only if their BPR is higher. New anchors are sorted by area and
// their layer order follows `strides` (YOLOv5's check_anchor_order); the caller divides them by
// the strides for the Detect head. `image_wh` and `labels_wh` are per image (original w, h and
// the labels' normalised w, h). No labels: anchors returned unchanged with a message.
AutoAnchorResult check_anchors(const std::vector<std::array<float, 2>>& image_wh,
                               const std::vector<std::vector<std::array<float, 2>>>& labels_wh,
                               const at::Tensor& anchors_px, const std::vector<int>& strides,
                               double thr, int imgsz, uint64_t seed);

}  // namespace yolo

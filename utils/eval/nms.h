#pragma once
// YOLOv5 v7.0's non_max_suppression: confidence = objectness x class score, class-offset batched
// NMS, optional multi-label, max_det per image.
#include <ATen/core/Tensor.h>

#include <vector>

namespace yolo {

struct NmsOptions {
  double conf_thres = 0.25;
  double iou_thres = 0.45;
  std::vector<int> classes;  // keep only these classes (empty: all)
  bool agnostic = false;
  bool multi_label = false;
  int max_det = 300;
};

// prediction (bs, N, 5+nc) as the model's eval output (xywh, obj, class scores). Returns one
// (n, 6) tensor per image: x1, y1, x2, y2, conf, class.
std::vector<at::Tensor> non_max_suppression(const at::Tensor& prediction, const NmsOptions& opt);

// Greedy NMS of xyxy `boxes` with `scores` on their own device; returns kept indices in
// descending score order (torchvision.ops.nms semantics). With max_keep >= 0 it stops once that
// many are kept: the result is the first max_keep of the full answer, found without comparing
// the boxes ranked after them.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_thres,
               int64_t max_keep = -1);

}  // namespace yolo

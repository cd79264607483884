#pragma once
// Box geometry shared by NMS, metrics, the loss and plotting (YOLOv5 utils/general.py, metrics.py).
#include <ATen/core/Tensor.h>

namespace yolo {

// (n, 4) centre-size <-> corner boxes.
at::Tensor xywh2xyxy(const at::Tensor& x);
at::Tensor xyxy2xywh(const at::Tensor& x);

// Pairwise IoU of (n, 4) and (m, 4) xyxy boxes -> (n, m).
at::Tensor box_iou(const at::Tensor& a, const at::Tensor& b, double eps = 1e-7);

// Maps xyxy boxes from a letterboxed image of size (h1, w1) back to the original (h0, w0), in
// place, and clips them to it (YOLOv5's scale_boxes with ratio_pad computed from the shapes).
void scale_boxes(at::Tensor& boxes, int64_t h1, int64_t w1, int64_t h0, int64_t w0);
// Same with an explicit gain and (pad_w, pad_h), as the loader reports them.
void scale_boxes(at::Tensor& boxes, double gain, double pad_w, double pad_h, int64_t h0,
                 int64_t w0);
// Same with separate horizontal and vertical gains (an image resized to a fixed shape).
void scale_boxes(at::Tensor& boxes, double gain_w, double gain_h, double pad_w, double pad_h,
                 int64_t h0, int64_t w0);

void clip_boxes(at::Tensor& boxes, int64_t h, int64_t w);

}  // namespace yolo

#include "utils/eval/boxes.h"

#include <torch/torch.h>

#include <algorithm>

namespace yolo {

at::Tensor xywh2xyxy(const at::Tensor& x) {
  at::Tensor y = x.clone();
  const at::Tensor hw = x.slice(1, 2, 3) / 2, hh = x.slice(1, 3, 4) / 2;
  y.slice(1, 0, 1) = x.slice(1, 0, 1) - hw;
  y.slice(1, 1, 2) = x.slice(1, 1, 2) - hh;
  y.slice(1, 2, 3) = x.slice(1, 0, 1) + hw;
  y.slice(1, 3, 4) = x.slice(1, 1, 2) + hh;
  return y;
}

at::Tensor xyxy2xywh(const at::Tensor& x) {
  at::Tensor y = x.clone();
  y.slice(1, 0, 1) = (x.slice(1, 0, 1) + x.slice(1, 2, 3)) / 2;
  y.slice(1, 1, 2) = (x.slice(1, 1, 2) + x.slice(1, 3, 4)) / 2;
  y.slice(1, 2, 3) = x.slice(1, 2, 3) - x.slice(1, 0, 1);
  y.slice(1, 3, 4) = x.slice(1, 3, 4) - x.slice(1, 1, 2);
  return y;
}

at::Tensor box_iou(const at::Tensor& a, const at::Tensor& b, double eps) {
  const at::Tensor a1 = a.slice(1, 0, 2).unsqueeze(1), a2 = a.slice(1, 2, 4).unsqueeze(1);
  const at::Tensor b1 = b.slice(1, 0, 2).unsqueeze(0), b2 = b.slice(1, 2, 4).unsqueeze(0);
  const at::Tensor inter = (torch::min(a2, b2) - torch::max(a1, b1)).clamp_min(0).prod(2);
  const at::Tensor area_a = (a2 - a1).prod(2), area_b = (b2 - b1).prod(2);
  return inter / (area_a + area_b - inter + eps);
}

void clip_boxes(at::Tensor& boxes, int64_t h, int64_t w) {
  boxes.select(1, 0).clamp_(0, w);
  boxes.select(1, 1).clamp_(0, h);
  boxes.select(1, 2).clamp_(0, w);
  boxes.select(1, 3).clamp_(0, h);
}

void scale_boxes(at::Tensor& boxes, double gain_w, double gain_h, double pad_w, double pad_h,
                 int64_t h0, int64_t w0) {
  boxes.select(1, 0).sub_(pad_w).div_(gain_w);
  boxes.select(1, 2).sub_(pad_w).div_(gain_w);
  boxes.select(1, 1).sub_(pad_h).div_(gain_h);
  boxes.select(1, 3).sub_(pad_h).div_(gain_h);
  clip_boxes(boxes, h0, w0);
}

void scale_boxes(at::Tensor& boxes, double gain, double pad_w, double pad_h, int64_t h0,
                 int64_t w0) {
  scale_boxes(boxes, gain, gain, pad_w, pad_h, h0, w0);
}

void scale_boxes(at::Tensor& boxes, int64_t h1, int64_t w1, int64_t h0, int64_t w0) {
  const double gain = std::min(static_cast<double>(h1) / h0, static_cast<double>(w1) / w0);
  const double pad_w = (w1 - w0 * gain) / 2, pad_h = (h1 - h0 * gain) / 2;
  scale_boxes(boxes, gain, pad_w, pad_h, h0, w0);
}

}  // namespace yolo

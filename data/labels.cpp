#include "data/labels.h"

#include <algorithm>

namespace yolo {

PixelBoxes to_pixel_boxes(const Labels& labels, float w, float h, float padw, float padh) {
  PixelBoxes out;
  out.reserve(labels.size());
  for (const auto& l : labels) {
    out.push_back({l.cls, w * (l.cx - l.w / 2) + padw, h * (l.cy - l.h / 2) + padh,
                   w * (l.cx + l.w / 2) + padw, h * (l.cy + l.h / 2) + padh});
  }
  return out;
}

Labels to_labels(const PixelBoxes& boxes, float w, float h, float eps) {
  Labels out;
  out.reserve(boxes.size());
  const float wmax = w - eps, hmax = h - eps;
  for (const auto& b : boxes) {
    const float x1 = std::clamp(b.x1, 0.f, wmax), x2 = std::clamp(b.x2, 0.f, wmax);
    const float y1 = std::clamp(b.y1, 0.f, hmax), y2 = std::clamp(b.y2, 0.f, hmax);
    out.push_back({b.cls, (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h});
  }
  return out;
}

}  // namespace yolo

#pragma once
// Box label types shared by the data pipeline. Labels on disk and in batches are normalised
// centre boxes (YOLO format); transforms work on pixel corner boxes.
#include <vector>

namespace yolo {

// One YOLO label row: class id and box centre/size as fractions of the image size.
struct Label {
  float cls = 0, cx = 0, cy = 0, w = 0, h = 0;
};
using Labels = std::vector<Label>;

// A box in pixel corners (x1, y1) top-left and (x2, y2) bottom-right, with its class.
struct PixelBox {
  float cls = 0, x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};
using PixelBoxes = std::vector<PixelBox>;

// Normalised centre boxes -> pixel corners for an image content of w x h placed at (padw, padh).
PixelBoxes to_pixel_boxes(const Labels& labels, float w, float h, float padw = 0, float padh = 0);

// Pixel corners -> normalised centre boxes for a w x h image; boxes are first clipped to the image
// (less eps, as YOLOv5's xyxy2xywhn(clip=True, eps=1e-3)).
Labels to_labels(const PixelBoxes& boxes, float w, float h, float eps = 1e-3f);

}  // namespace yolo

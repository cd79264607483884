#pragma once
// Detections as YOLO label lines (val --save-txt, detect --save-txt).
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "yolo/detector.h"

namespace yolo {

// Writes `det` (n, 6: x1 y1 x2 y2 conf cls, in pixels of an image of w0 x h0) to `path` as YOLO
// lines "cls cx cy w h[ conf]", normalised to the image. Throws naming the file when it cannot.
void write_yolo_txt(const std::string& path, const at::Tensor& det, int64_t w0, int64_t h0,
                    bool save_conf);
void write_yolo_txt(const std::string& path, const std::vector<Detection>& det, int64_t w0,
                    int64_t h0, bool save_conf);

}  // namespace yolo

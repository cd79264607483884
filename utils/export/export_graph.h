#pragma once
// A fused detection model as a flat list of operations, the form both exporters (ONNX and
// TorchScript) write out. Value 0 is the input image batch; operation k produces value k + 1.
// The Detect head is kept whole: each writer emits its decoding (YOLOv5's order: xy, wh, object,
// classes) in its own terms.
#include <cstdint>
#include <string>
#include <vector>

namespace yolo {

class DetectionModelImpl;

// A float32 array in row-major order. Plain data, so that the ONNX writer compiles without
// LibTorch's headers (the wheel's include folder carries an older protobuf than ONNX's).
struct ExportArray {
  std::vector<int64_t> dims;
  std::vector<float> values;
};

struct ExportOp {
  enum class Kind { kConv, kAdd, kConcat, kMaxPool, kUpsample };
  Kind kind = Kind::kConv;
  std::vector<int> inputs;   // value ids
  std::string name;          // kConv: the parameters' prefix, e.g. "model.2.m.0.cv1.conv"
  ExportArray weight, bias;  // kConv: BatchNorm folded in
  int64_t kernel = 1, stride = 1, pad = 0, dilation = 1, groups = 1;  // kConv, kMaxPool
  bool silu = false;   // kConv: x * sigmoid(x) after it
  double scale = 2.0;  // kUpsample: nearest, both dimensions
};

struct ExportHead {
  std::vector<int> inputs;                // value ids, one per level
  std::vector<ExportArray> weight, bias;  // per level: the 1x1 convolution
  std::vector<double> stride;             // pixels per cell, per level
  ExportArray anchors;                    // (levels, na, 2) in pixels
  int nc = 0, na = 0;
  int no() const { return nc + 5; }
};

struct ExportGraph {
  std::vector<ExportOp> ops;
  ExportHead head;
  // Output rows for an h x w input: na * sum over levels of (h / stride) * (w / stride).
  int64_t rows(int64_t h, int64_t w) const;
};

// Lowers `model` (fused, as DetectionModelImpl::fuse leaves it). Throws std::runtime_error naming
// a layer this exporter cannot write, or an unfused convolution.
ExportGraph lower_model(DetectionModelImpl& model);

}  // namespace yolo

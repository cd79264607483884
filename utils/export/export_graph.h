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

// The activations a Conv block may end with (YOLOv5's Conv.default_act choices).
enum class ExportAct {
  kNone,
  kSiLU,
  kReLU,
  kLeakyReLU,
  kReLU6,
  kHardswish,
  kSigmoid,
  kTanh,
  kGELU,
  kMish,
  kELU
};

struct ExportOp {
  // kAct: an activation alone; kSpaceToDepth: Focus's four pixel phases side by side
  // (x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]); kPad: zeros.
  enum class Kind { kConv, kAdd, kConcat, kMaxPool, kUpsample, kAct, kSpaceToDepth, kPad };
  Kind kind = Kind::kConv;
  std::vector<int> inputs;   // value ids
  std::string name;          // kConv: the parameters' prefix, e.g. "model.2.m.0.cv1.conv"
  ExportArray weight, bias;  // kConv: BatchNorm folded in
  // kConv, kMaxPool: height then width.
  int64_t kernel = 1, stride = 1, pad = 0, dilation = 1, groups = 1;
  int64_t kernel_w = 1, stride_w = 1, pad_w = 0;
  ExportAct act = ExportAct::kNone;  // kConv: after it; kAct: the activation
  double alpha = 0;                  // kLeakyReLU: the negative slope; kELU: alpha
  double scale = 2.0;                // kUpsample: nearest, both dimensions
  std::vector<int64_t> pads;         // kPad: left, right, top, bottom
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
// a layer this exporter cannot write (C3TR's transformer, Contract, Expand), or an unfused
// convolution.
ExportGraph lower_model(DetectionModelImpl& model);

}  // namespace yolo

#pragma once
// A fused detection model as a flat list of operations, the form both exporters (ONNX and
// TorchScript) write out. Value 0 is the input image batch; operation k produces value k + 1.
// The Detect head is kept whole: each writer emits its decoding in its own terms, YOLOv5's
// (B, N, 5 + nc) rows (xy, wh, object, classes) or Ultralytics' anchor-free (B, 4 + nc, N)
// (xywh, classes; the distance bins' expectation and the anchor points in the graph).
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
  // (x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]); kPad: zeros;
  // kSlice: channel ranges of the input side by side; kAttention: inputs (qkv, v) of Ultralytics'
  // Attention, the heads' softmax(q^T k * scale) applied to v, shaped as v (B, heads*head_dim,
  // H, W); v is the value channels of qkv (a kSlice), whose shape the writers reuse.
  enum class Kind {
    kConv,
    kAdd,
    kConcat,
    kMaxPool,
    kUpsample,
    kAct,
    kSpaceToDepth,
    kPad,
    kSlice,
    kAttention
  };
  Kind kind = Kind::kConv;
  std::vector<int> inputs;   // value ids
  std::string name;          // kConv: the parameters' prefix, e.g. "model.2.m.0.cv1.conv"
  ExportArray weight, bias;  // kConv: BatchNorm folded in
  // kConv, kMaxPool: height then width.
  int64_t kernel = 1, stride = 1, pad = 0, dilation = 1, groups = 1;
  int64_t kernel_w = 1, stride_w = 1, pad_w = 0;
  ExportAct act = ExportAct::kNone;              // kConv: after it; kAct: the activation
  double alpha = 0;                              // kLeakyReLU: the negative slope; kELU: alpha
  double scale = 2.0;                            // kUpsample: nearest, both dimensions
  std::vector<int64_t> pads;                     // kPad: left, right, top, bottom
  std::vector<int64_t> ranges;                   // kSlice: begin, end, begin, end, ... (channels)
  int64_t heads = 1, key_dim = 0, head_dim = 0;  // kAttention
  double attn_scale = 1.0;                       // kAttention: key_dim^-0.5
};

struct ExportHead {
  std::vector<int> inputs;                // value ids, one per level
  std::vector<ExportArray> weight, bias;  // per level: the 1x1 convolution (YOLOv5)
  std::vector<double> stride;             // pixels per cell, per level
  ExportArray anchors;                    // (levels, na, 2) in pixels (YOLOv5)
  int nc = 0, na = 0;
  // Ultralytics' anchor-free head: per level the value ids of its box branch (4 * reg_max
  // distance-bin logits) and class branch (nc logits), and the DFL's bin values (0..reg_max-1).
  bool anchor_free = false;
  int reg_max = 0;
  std::vector<int> box, cls;
  ExportArray dfl_bins;
  // YOLO26's one-to-one head (the model's selected head), exported end to end: the writers
  // append its top-k selection, and the output is (B, min(max_det, N), 6) rows of x1, y1, x2, y2,
  // score, class, as Ultralytics' Detect.postprocess gives them; no NMS follows.
  bool end2end = false;
  int max_det = 300;
  // Values per output row (YOLOv5: xywh, object, classes) or per anchor point (xywh, classes).
  int no() const { return anchor_free ? nc + 4 : nc + 5; }
};

struct ExportGraph {
  std::vector<ExportOp> ops;
  ExportHead head;
  // Output rows (anchor points) for an h x w input: na * sum over levels of (h / stride) *
  // (w / stride).
  int64_t rows(int64_t h, int64_t w) const;
};

// Lowers `model` (fused, as DetectionModelImpl::fuse leaves it) with the head it has selected for
// inference (DetectHead::select_for_inference). Throws std::runtime_error naming a layer this
// exporter cannot write (C3TR's transformer, Contract, Expand), or an unfused convolution.
ExportGraph lower_model(DetectionModelImpl& model);

}  // namespace yolo

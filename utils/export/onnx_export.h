#pragma once
// ONNX files as YOLOv5 v7.0's export.py writes them: input `images` (B, 3, H, W), output
// `output0` (B, N, 5 + nc) with the Detect layer's decoding in the graph, metadata `stride` and
// `names` (Python's dict literal, which YOLOv5's DetectMultiBackend evaluates). For Ultralytics'
// anchor-free models, as its exporter writes them: `output0` (B, 4 + nc, N), or for YOLO26's
// one-to-one head (B, k, 6) detections (x1, y1, x2, y2, score, class; TopK in the graph, k =
// min(300, N) at the export's image size, which smaller inputs of a --dynamic file cannot fill).
// Written with the ONNX C++ library and checked by its checker and strict shape inference; a build
// without it (CMake found no ONNX package) says so when asked for ONNX.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "utils/export/export_graph.h"

namespace yolo {

constexpr int kMinOnnxOpset = 11;  // Resize and Range
constexpr int kMaxOnnxOpset = 17;  // the newest the ONNX library in use knows

struct OnnxOptions {
  int opset = 12;
  bool dynamic = false;  // batch, height and width named instead of fixed
  bool half = false;     // float16 weights, input and output
  int64_t batch = 1, height = 640, width = 640;
  int stride = 32;  // the metadata's: the largest stride
  std::vector<std::string> names;
  // Further metadata_props after stride and names (Ultralytics' task, imgsz, args, ...).
  std::vector<std::pair<std::string, std::string>> metadata;
};

bool onnx_export_available();

// The serialized ModelProto. Throws std::runtime_error when the checker or shape inference
// rejects the graph, or when the build has no ONNX library.
std::string onnx_model_bytes(const ExportGraph& g, const OnnxOptions& o);

// IEEE 754 binary16 bits of `f`, rounded to nearest even (as torch's .half()): --half's weights.
uint16_t float16_bits(float f);

// {0: 'person', 1: 'bicycle'}: the names as Python's repr of a dict, as YOLOv5 stores them.
std::string python_names_dict(const std::vector<std::string>& names);

}  // namespace yolo

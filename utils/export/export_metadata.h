#pragma once
// The metadata Ultralytics' exporter writes beside its anchor-free models, which its YOLO() reads
// back (task, stride, names, imgsz, batch, args, ...): as ONNX metadata_props (each value Python's
// literal text, as str() gives it) and as TorchScript's config.txt (one JSON object).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace yolo {

struct ExportDescription {
  std::string model;  // e.g. "yolo11n" (the weights' stem)
  std::vector<std::string> names;
  int stride = 32;
  int64_t batch = 1, height = 640, width = 640;
  bool half = false, dynamic = false;
  bool end2end = false;  // the one-to-one head's (B, k, 6) detections
};

// Key and value pairs for ONNX, without `stride` and `names` (the writer's own first two keys).
std::vector<std::pair<std::string, std::string>> ultralytics_onnx_metadata(
    const ExportDescription& d);

// config.txt's JSON: the same keys, `names` as {"0": "a", ...}, and `dynamic` true whatever
// d.dynamic says: the scripted module takes any batch and size (a multiple of the stride).
std::string ultralytics_config_json(const ExportDescription& d);

}  // namespace yolo

#pragma once
// The export program: YOLOv5 v7.0 export.py's flags where they apply, writing TorchScript and ONNX
// beside the weights (best.pt -> best.torchscript, best.onnx), each file written whole or not at
// all.
#include <string>
#include <vector>

namespace yolo {

struct ExportArgs {
  std::string weights, data, cfg;
  std::vector<int> imgsz = {640, 640};  // one number (square) or height and width
  int batch_size = 1;
  std::string device = "cpu";
  bool half = false, dynamic = false;
  bool end2end = false;  // YOLO26: the one-to-one head and its top-k, (B, 300, 6) detections
  int opset = 12;
  std::vector<std::string> include = {"torchscript"};
};

struct ExportResult {
  std::vector<std::string> files;  // what was written, in --include's order
  // (B, N, 5 + nc), Ultralytics' (B, 4 + nc, N) or end to end (B, k, 6) for the export's input
  std::vector<int64_t> output_shape;
};

// Checks every flag before reading the weights; throws UsageError naming the flag, and
// std::runtime_error naming the file for unreadable weights or a folder that cannot be written.
ExportResult run_export(const ExportArgs& args);

// export's command line (argv) -> exit status, as the program's main runs it.
int export_main(int argc, char** argv);

}  // namespace yolo

#pragma once
// TorchScript files as YOLOv5 v7.0's export.py writes them: a module whose forward(images) returns
// the decoded (B, N, 5 + nc) tensor (Ultralytics' (B, 4 + nc, N) for its anchor-free models, and
// (B, 300, 6) detections for a YOLO26 one-to-one head, whose method `decoded` gives the rows before
// the top-k), saved
// with the extra file `config.txt` = {"shape", "stride", "names"}. The module is scripted from
// generated source (not traced), so it takes any batch and any image size that is a multiple of the
// stride, on the CPU or a GPU; config.txt's "dynamic": true says so to the programs here (YOLOv5
// ignores the key).
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "utils/export/export_graph.h"

namespace yolo {

struct TorchScriptOptions {
  std::vector<int64_t> shape = {1, 3, 640, 640};  // the export's input shape, for config.txt
  int stride = 32;
  std::vector<std::string> names;
  torch::Device device = torch::kCPU;
  bool half = false;  // float16 parameters; the module then takes float16 images
  // config.txt's text in place of YOLOv5's (Ultralytics' metadata JSON, for its models).
  std::string config_json;
};

// The TorchScript source of the module's methods (what the file's code/ holds, before LibTorch
// compiles and saves it).
std::string torchscript_source(const ExportGraph& g);

// The saved module's bytes (a zip archive torch.jit.load and torch::jit::load read).
std::string torchscript_bytes(const ExportGraph& g, const TorchScriptOptions& o);

// config.txt's JSON text: {"shape": [...], "stride": 32, "names": {"0": "a", ...}, "dynamic": true}
std::string torchscript_config_json(const TorchScriptOptions& o);

}  // namespace yolo

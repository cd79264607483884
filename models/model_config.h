#pragma once
// A model YAML (YOLOv5 v7.0 schema: nc, depth_multiple, width_multiple, anchors, backbone, head)
// parsed into plain values, with errors that name the file, the line and the layer at fault.
#include <string>
#include <vector>

namespace yolo {

struct LayerSpec {
  std::vector<int> from;          // -1 = previous layer
  int number = 1;                 // repeats before depth_multiple
  std::string module;             // "Conv", "C3", "nn.Upsample", ...
  std::vector<std::string> args;  // scalars as written ("nc", "anchors", "None", "False", "64")
  int line = 0;                   // 1-based line in the YAML, for messages
};

struct ModelSpec {
  std::string source;  // file name (or "<string>") for messages
  int nc = 80;
  double depth_multiple = 1.0;
  double width_multiple = 1.0;
  std::vector<std::vector<double>> anchors;  // per level: w0,h0,w1,h1,... in pixels
  std::vector<LayerSpec> layers;             // backbone then head
};

ModelSpec parse_model_spec_file(const std::string& path);
ModelSpec parse_model_spec_string(const std::string& yaml, const std::string& source = "<string>");

}  // namespace yolo

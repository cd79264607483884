#pragma once
// A model YAML parsed into plain values, with errors that name the file, the line and the layer at
// fault. Two schemas: YOLOv5 v7.0's (nc, depth_multiple, width_multiple, anchors, backbone, head)
// and Ultralytics' anchor-free one (nc, scales, optional reg_max and end2end, backbone, head; no
// anchors), whose scale letter comes from the file name: "yolo11s.yaml" is yolo11.yaml at scale s.
#include <string>
#include <vector>

namespace yolo {

struct LayerSpec {
  std::vector<int> from;  // -1 = previous layer
  int number = 1;         // repeats before depth_multiple
  std::string module;     // "Conv", "C3", "nn.Upsample", ...
  // Scalars as written ("nc", "anchors", "None", "False", "64"); a list of scalars as "[5, 9, 13]".
  std::vector<std::string> args;
  int line = 0;  // 1-based line in the YAML, for messages
};

struct ModelSpec {
  std::string source;  // file name (or "<string>") for messages
  int nc = 80;
  double depth_multiple = 1.0;
  double width_multiple = 1.0;
  // Per level: w0,h0,w1,h1,... in pixels. Empty when `anchors:` is a count (anchor_count).
  std::vector<std::vector<double>> anchors;
  // `anchors: N` (or a hyp file's `anchors`): N anchors per level, placeholders that AutoAnchor
  // replaces, as YOLOv5 builds them. 0 when the YAML lists them.
  int anchor_count = 0;
  // `activation:` as written (e.g. "nn.LeakyReLU(0.1)"); empty: SiLU.
  std::string activation;
  int activation_line = 0;
  std::vector<LayerSpec> layers;  // backbone then head

  // Ultralytics' schema: no `anchors:`, so the Detect head is anchor-free (distances to the box
  // sides, reg_max bins each). `scale` is the letter read ("" for a YAML without `scales:`);
  // max_channels caps every layer's channels before the width multiple.
  bool anchor_free = false;
  std::string scale;
  double max_channels = 0;  // 0: no cap
  int reg_max = 16;
  // `end2end: True` (YOLO26): the Detect head has a one-to-one copy of its branches, whose top-k
  // output needs no NMS.
  bool end2end = false;

  int anchors_per_level() const {
    if (anchor_count > 0) return anchor_count;
    return anchors.empty() ? 0 : static_cast<int>(anchors[0].size() / 2);
  }
};

// The YAML text `path` names: the file, or for a scaled name such as "yolo11s.yaml" (no such file
// beside yolo11.yaml) yolo11.yaml's text with `scale: s` added, so the text alone rebuilds the
// model (checkpoints keep it).
std::string read_model_yaml(const std::string& path);
ModelSpec parse_model_spec_file(const std::string& path);
ModelSpec parse_model_spec_string(const std::string& yaml, const std::string& source = "<string>");

}  // namespace yolo

#pragma once
// detect.py's loop: images from a file, folder, glob or .txt list -> letterbox -> model -> NMS ->
// boxes in original pixels, drawn onto the image and/or written as YOLO-format labels.
#include <string>
#include <vector>

namespace yolo {

struct DetectConfig {
  std::string weights, cfg, data, source, device;
  int imgsz = 640;
  double conf_thres = 0.25, iou_thres = 0.45;
  int max_det = 1000;
  std::vector<int> classes;
  bool save_txt = false, save_conf = false, nosave = false;
  bool save_crop = false;  // crops/<class name>/<image stem>[N].jpg per box, as YOLOv5's
  bool agnostic_nms = false, half = false, hide_labels = false, hide_conf = false;
  bool augment = false;  // test-time augmentation (.pt weights)
  std::string project = "runs/detect", name = "exp";
  bool exist_ok = false;
  int line_thickness = 3;
};

// Expands a --source value: an image, a folder (its images, sorted), a glob pattern, or a .txt
// file listing images. Throws UsageError naming --source when nothing matches.
std::vector<std::string> expand_source(const std::string& source);

// Runs detection; returns the run dir. Throws on errors.
std::string run_detect(const DetectConfig& cfg);

}  // namespace yolo

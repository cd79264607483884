#pragma once
// detect.py's loop: images and videos (a file, folder, glob or .txt list) or live streams ->
// letterbox -> model -> NMS -> boxes in original pixels, drawn onto the image or video and/or
// written as YOLO-format labels.
#include <string>
#include <vector>

namespace yolo {

struct DetectConfig {
  std::string weights, cfg, data, source, device;
  std::vector<int> imgsz = {640};  // one number (square) or height and width
  int batch_size = 1;              // images (or video frames) per forward pass
  int vid_stride = 1;              // every n-th frame of videos and streams
  bool stream_buffer = false;      // streams: every frame in order, not the newest at each step
  double conf_thres = 0.25;
  double iou_thres = -1;  // < 0: the model family's (0.45; 0.7 for YOLOv8/YOLO11)
  int max_det = 1000;
  std::vector<int> classes;
  bool save_txt = false, save_conf = false, nosave = false;
  bool save_crop = false;  // crops/<class name>/<image stem>[N].jpg per box, as YOLOv5's
  bool agnostic_nms = false, half = false, hide_labels = false, hide_conf = false;
  bool augment = false;  // test-time augmentation (.pt weights)
  bool end2end = false;  // YOLO26: the one-to-one head's top detections, no NMS
  std::string project = "runs/detect", name = "exp";
  bool exist_ok = false;
  int line_thickness = 3;
};

// Runs detection; returns the run dir. Throws on errors.
std::string run_detect(const DetectConfig& cfg);

}  // namespace yolo

#pragma once
// yolo::Detector: object detection on OpenCV images with any weights the detect program takes
// (this project's checkpoints, YOLOv5 .pt files, and .torchscript and .onnx exports where the
// build runs them). Part of the public library (find_package(yolo_cpp), target yolo_cpp::yolo).
#include <memory>
#include <opencv2/core/mat.hpp>
#include <string>
#include <vector>

namespace yolo {

// One detected object, in the pixels of the image given to detect().
struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // top-left and bottom-right corners
  float confidence = 0;
  int class_id = 0;
};

// The detect program's settings, with its defaults.
struct DetectorOptions {
  std::string device;         // "" (first GPU, else CPU), "cpu", "0", ...
  int imgsz = 640;            // inference size, rounded up to a multiple of the model's stride
  int imgsz_width = 0;        // > 0: a rectangle, imgsz high and imgsz_width wide
  float conf_thres = 0.25f;   // keep detections at least this confident
  float iou_thres = -1;       // NMS IoU threshold; < 0: the model's family's (YOLOv5 0.45, 0.7
                              // for YOLOv8/YOLO11 as Ultralytics' predict)
  int max_det = 1000;         // at most this many detections per image
  std::vector<int> classes;   // keep only these class ids (empty: all)
  bool agnostic_nms = false;  // NMS across classes
  bool half = false;          // float16 inference (CUDA, .pt weights)
  bool augment = false;       // test-time augmentation: flips and scales (.pt weights)
  bool end2end = false;       // end-to-end models (YOLO26 .pt weights): the one-to-one head's
                              // top detections, no NMS (a file exported with export --end2end
                              // runs so without it)
  std::string data;           // a dataset YAML whose names replace the weights' (optional)
  std::string cfg;            // .pt only: a model YAML instead of the checkpoint's (optional)
  bool verbose = false;       // print what loading reports (the detect program's lines)
};

class Detector {
 public:
  // Loads `weights` on the options' device. Throws std::runtime_error naming the option or the
  // file: a bad option, a missing file, one that cannot be loaded.
  explicit Detector(const std::string& weights, const DetectorOptions& options = {});
  ~Detector();
  Detector(Detector&&) noexcept;
  Detector& operator=(Detector&&) noexcept;

  // Detections in a BGR image (8-bit, 3 channels, as cv::imread gives), most confident first.
  std::vector<Detection> detect(const cv::Mat& bgr);
  // The same for several images at once (one forward pass; sizes may differ).
  std::vector<std::vector<Detection>> detect(const std::vector<cv::Mat>& bgr_images);

  // Class names by id, from the weights (or DetectorOptions::data).
  const std::vector<std::string>& names() const;
  // The size (width, height) an image of `image_size` is resized and padded to for detect().
  cv::Size input_size(cv::Size image_size) const;
  // The same for one detect() call on several images: the full square (or rectangle) when their
  // sizes differ.
  cv::Size input_size(const std::vector<cv::Mat>& bgr_images) const;
  int stride() const;
  // The device in use, e.g. "cpu" or "cuda:0".
  std::string device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolo

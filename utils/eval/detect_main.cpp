#include "utils/eval/detect_main.h"

#include <iostream>

#include "utils/core/app_main.h"
#include "utils/core/cli.h"
#include "utils/core/errors.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/eval/predictor.h"

namespace yolo {

namespace {

// detect.py's flags and defaults, bound to the predictor's configuration.
const std::vector<yolo::cli::Flag<yolo::DetectConfig>>& flags() {
  using C = yolo::DetectConfig;
  using yolo::cli::at_least;
  using yolo::cli::Bind;
  using yolo::cli::in_range;
  static const std::vector<yolo::cli::Flag<C>> table = {
      Bind("weights", &C::weights, "model weights path").metavar("PATH"),
      Bind("source", &C::source,
           "image, video, folder, glob, .txt list, webcam index, stream URL or .streams list")
          .metavar("PATH"),
      Bind("data", &C::data, "dataset YAML for class names (default: from the checkpoint)")
          .metavar("PATH"),
      Bind("cfg", &C::cfg, "model YAML (default: from the checkpoint)").metavar("PATH"),
      Bind("imgsz", &C::imgsz, "inference size: one number (square) or height and width")
          .alias("--img")
          .alias("--img-size")
          .check(yolo::cli::image_sizes),
      Bind("conf-thres", &C::conf_thres, "confidence threshold").check(in_range(0, 1)),
      Bind("iou-thres", &C::iou_thres,
           "NMS IoU threshold (default -1: 0.45, or 0.7 for anchor-free YOLOv8/YOLO11 weights)")
          .check([](const double& v) { return v == -1 ? std::string() : in_range(0, 1)(v); }),
      Bind("max-det", &C::max_det, "maximum detections per image")
          .check(at_least(1, "must be >= 1")),
      Bind("device", &C::device, "cuda device, i.e. 0 or cpu"),
      Bind("save-txt", &C::save_txt, "save results to *.txt"),
      Bind("save-conf", &C::save_conf, "save confidences in --save-txt labels"),
      Bind("save-crop", &C::save_crop, "save cropped prediction boxes"),
      Bind("nosave", &C::nosave, "do not save images"),
      Bind("classes", &C::classes, "filter by class: --classes 0 2 3 or --classes 0,2,3"),
      Bind("agnostic-nms", &C::agnostic_nms, "class-agnostic NMS"),
      Bind("end2end", &C::end2end,
           "end-to-end models (YOLO26): the one-to-one head's top detections, no NMS"),
      Bind("augment", &C::augment, "augmented inference (flips and scales; .pt weights)"),
      Bind("vid-stride", &C::vid_stride, "video frame-rate stride")
          .check(at_least(1, "must be >= 1")),
      Bind("stream-buffer", &C::stream_buffer,
           "streams: every frame in order (default: the newest at each step)"),
      Bind("batch-size", &C::batch_size, "images or video frames per forward pass")
          .check(at_least(1, "must be >= 1")),
      Bind("half", &C::half, "use FP16 half-precision inference (CUDA, .pt weights)"),
      Bind("project", &C::project, "save results to project/name").metavar("DIR"),
      Bind("name", &C::name, "save results to project/name").check(yolo::cli::run_name),
      Bind("exist-ok", &C::exist_ok, "existing project/name ok, do not increment"),
      Bind("line-thickness", &C::line_thickness, "bounding box thickness (pixels)")
          .check(at_least(1, "must be >= 1")),
      Bind("hide-labels", &C::hide_labels, "hide labels"),
      Bind("hide-conf", &C::hide_conf, "hide confidences"),
  };
  return table;
}

}  // namespace

int detect_main(int argc, char** argv) {
  const yolo::cli::Parsed<yolo::DetectConfig> p = yolo::cli::parse(flags(), argc, argv, "detect");
  if (p.help) {
    std::cout << yolo::cli::help_text(
        yolo::cli::specs_of(flags()),
        "Detect objects in images, videos and streams with YOLOv5 weights (YOLOv5 v7.0 "
        "detect.py flags)",
        "detect", yolo::version_help());
    return 0;
  }
  if (p.version) {
    std::cout << yolo::version_report();
    return 0;
  }
  const std::string bad = yolo::cli::first_bad_value(flags(), p.values);
  if (!bad.empty()) throw yolo::UsageError(bad);
  yolo::run_detect(p.values);
  return 0;
}

}  // namespace yolo

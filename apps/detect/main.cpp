// detect: runs a model on images (YOLOv5 detect.py flags).
#include <cxxopts.hpp>
#include <iostream>

#include "utils/core/app_main.h"
#include "utils/core/cuda_env.h"
#include "utils/core/errors.h"
#include "utils/core/options.h"
#include "utils/eval/predictor.h"

namespace {

int run(int argc, char** argv) {
  cxxopts::Options cli("detect", "Detect objects in images with YOLOv5 weights");
  cli.add_options()("weights", "model weights path",
                    cxxopts::value<std::string>()->default_value(""))(
      "source", "image, folder, glob or .txt list",
      cxxopts::value<std::string>()->default_value(""))(
      "data", "dataset YAML for class names (default: from the checkpoint)",
      cxxopts::value<std::string>()->default_value(""))(
      "cfg", "model YAML (default: from the checkpoint)",
      cxxopts::value<std::string>()->default_value(""))(
      "imgsz", "inference size in pixels (aliases --img, --img-size)",
      cxxopts::value<int>()->default_value("640"))("conf-thres", "confidence threshold",
                                                   cxxopts::value<double>()->default_value("0.25"))(
      "iou-thres", "NMS IoU threshold", cxxopts::value<double>()->default_value("0.45"))(
      "max-det", "maximum detections per image", cxxopts::value<int>()->default_value("1000"))(
      "device", "cuda device, i.e. 0 or cpu", cxxopts::value<std::string>()->default_value(""))(
      "save-txt", "save results to *.txt")("save-conf", "save confidences in --save-txt labels")(
      "nosave", "do not save images")("classes", "filter by class: --classes 0,2,3",
                                      cxxopts::value<std::vector<int>>())(
      "project", "save results to project/name",
      cxxopts::value<std::string>()->default_value("runs/detect"))(
      "name", "save results to project/name", cxxopts::value<std::string>()->default_value("exp"))(
      "exist-ok", "existing project/name ok, do not increment")(
      "line-thickness", "bounding box thickness (pixels)",
      cxxopts::value<int>()->default_value("3"))(
      "version", "print the versions of LibTorch, CUDA, cuDNN, NCCL and the GPUs seen, and exit")(
      "h,help", "show this help and exit");
  const cxxopts::ParseResult r = yolo::parse_app_args(cli, argc, argv, "detect");
  if (r.count("help")) {
    std::cout << cli.help();
    return 0;
  }
  if (r.count("version")) {
    std::cout << yolo::version_report();
    return 0;
  }
  yolo::DetectConfig c;
  c.weights = r["weights"].as<std::string>();
  c.source = r["source"].as<std::string>();
  c.data = r["data"].as<std::string>();
  c.cfg = r["cfg"].as<std::string>();
  c.imgsz = r["imgsz"].as<int>();
  c.conf_thres = r["conf-thres"].as<double>();
  c.iou_thres = r["iou-thres"].as<double>();
  c.max_det = r["max-det"].as<int>();
  c.device = r["device"].as<std::string>();
  c.save_txt = r["save-txt"].as<bool>();
  c.save_conf = r["save-conf"].as<bool>();
  c.nosave = r["nosave"].as<bool>();
  if (r.count("classes")) c.classes = r["classes"].as<std::vector<int>>();
  c.project = r["project"].as<std::string>();
  c.name = r["name"].as<std::string>();
  c.exist_ok = r["exist-ok"].as<bool>();
  c.line_thickness = r["line-thickness"].as<int>();
  if (c.conf_thres < 0 || c.conf_thres > 1)
    throw yolo::UsageError("--conf-thres: must be in [0, 1]");
  if (c.iou_thres < 0 || c.iou_thres > 1) throw yolo::UsageError("--iou-thres: must be in [0, 1]");
  if (c.max_det < 1) throw yolo::UsageError("--max-det: must be >= 1");
  if (c.line_thickness < 1) throw yolo::UsageError("--line-thickness: must be >= 1");
  yolo::run_detect(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return yolo::run_app("detect", [&] { return run(argc, argv); });
}

// detect: runs a model on images (YOLOv5 detect.py flags). The predictor lands with the training
// issue; until then the flags are parsed and checked and the run stops with a message.
#include <cxxopts.hpp>
#include <iostream>

#include "utils/app_main.h"
#include "utils/errors.h"

int main(int argc, char** argv) {
  return yolo::run_app("detect", [&] {
    cxxopts::Options cli("detect", "Detect objects in images with YOLOv5 weights");
    cli.add_options()("weights", "model weights path",
                      cxxopts::value<std::string>()->default_value(""))(
        "source", "image, folder, glob or .txt list",
        cxxopts::value<std::string>()->default_value(""))(
        "imgsz", "inference size (pixels)", cxxopts::value<int>()->default_value("640"))(
        "conf-thres", "confidence threshold", cxxopts::value<double>()->default_value("0.25"))(
        "iou-thres", "NMS IoU threshold", cxxopts::value<double>()->default_value("0.45"))(
        "save-txt", "save results to *.txt")("save-conf", "save confidences in --save-txt labels")(
        "nosave", "do not save images")("classes", "filter by class: --classes 0,2,3",
                                        cxxopts::value<std::vector<int>>())(
        "project", "save results to project/name",
        cxxopts::value<std::string>()->default_value("runs/detect"))(
        "name", "save results to project/name",
        cxxopts::value<std::string>()->default_value("exp"))("h,help", "show this help and exit");
    cxxopts::ParseResult r;
    try {
      r = cli.parse(argc, argv);
    } catch (const cxxopts::exceptions::exception& e) {
      throw yolo::UsageError(std::string(e.what()) + " (see detect --help)");
    }
    if (r.count("help")) {
      std::cout << cli.help();
      return 0;
    }
    throw std::runtime_error("detection is not implemented yet in this build");
  });
}

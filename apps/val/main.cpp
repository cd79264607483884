// val: evaluates weights on a dataset split (YOLOv5 val.py flags). The validator lands with the
// training issue; until then the flags are parsed and checked and the run stops with a message.
#include <cxxopts.hpp>
#include <iostream>

#include "utils/app_main.h"
#include "utils/errors.h"

int main(int argc, char** argv) {
  return yolo::run_app("val", [&] {
    cxxopts::Options cli("val", "Validate YOLOv5 weights on a dataset");
    cli.add_options()("weights", "model weights path",
                      cxxopts::value<std::string>()->default_value(""))(
        "data", "dataset YAML", cxxopts::value<std::string>()->default_value("coco128.yaml"))(
        "imgsz", "inference size (pixels)", cxxopts::value<int>()->default_value("640"))(
        "batch-size", "batch size", cxxopts::value<int>()->default_value("32"))(
        "conf-thres", "confidence threshold", cxxopts::value<double>()->default_value("0.001"))(
        "iou-thres", "NMS IoU threshold", cxxopts::value<double>()->default_value("0.6"))(
        "task", "val or test", cxxopts::value<std::string>()->default_value("val"))(
        "device", "cuda device, i.e. 0 or cpu", cxxopts::value<std::string>()->default_value(""))(
        "save-txt", "save results to *.txt")("save-json", "save a COCO-JSON results file")(
        "verbose", "report mAP by class")("h,help", "show this help and exit");
    cxxopts::ParseResult r;
    try {
      r = cli.parse(argc, argv);
    } catch (const cxxopts::exceptions::exception& e) {
      throw yolo::UsageError(std::string(e.what()) + " (see val --help)");
    }
    if (r.count("help")) {
      std::cout << cli.help();
      return 0;
    }
    throw std::runtime_error("validation is not implemented yet in this build");
  });
}

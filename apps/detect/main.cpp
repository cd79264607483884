// detect: runs a model on images, videos and streams (YOLOv5 detect.py flags).
#include "utils/core/app_main.h"
#include "utils/eval/detect_main.h"

int main(int argc, char** argv) {
  return yolo::run_app("detect", [&] { return yolo::detect_main(argc, argv); });
}

// val: evaluates weights on a dataset split, printing YOLOv5's results table (val.py flags).
#include "utils/core/app_main.h"
#include "utils/eval/val_main.h"

int main(int argc, char** argv) {
  return yolo::run_app("val", [&] { return yolo::val_main(argc, argv); });
}

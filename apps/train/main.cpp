#include "apps/train/train_main.h"
#include "utils/app_main.h"

int main(int argc, char** argv) {
  return yolo::run_app("train", [&] { return yolo::train_main(argc, argv); });
}

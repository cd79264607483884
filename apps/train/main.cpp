#include "utils/core/app_main.h"
#include "utils/engine/train_main.h"

int main(int argc, char** argv) {
  return yolo::run_app("train", [&] { return yolo::train_main(argc, argv); });
}

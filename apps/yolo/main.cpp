// yolo: Ultralytics' command syntax (yolo [detect] train|val|predict|export key=value ...) onto
// the train, val, detect and export programs.
#include "utils/command/yolo_command.h"
#include "utils/core/app_main.h"

int main(int argc, char** argv) {
  return yolo::run_app("yolo", [&] { return yolo::yolo_main(argc, argv); });
}

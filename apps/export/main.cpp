// export: writes TorchScript and ONNX files from weights (YOLOv5 export.py flags).
#include "utils/export/export_main.h"

int main(int argc, char** argv) { return yolo::export_main(argc, argv); }

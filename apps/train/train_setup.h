#pragma once
// train's engine entry: options -> device -> model -> weights. The training loop lands with the
// training issue; until then a run checks its whole set-up and says that training is missing.
#include <string>

#include "models/yolo.h"
#include "utils/device.h"
#include "utils/options.h"

namespace yolo {

struct TrainSetup {
  Options opt;
  DeviceSelection device;
  DetectionModel model{nullptr};
  int nc = 0;
  int imgsz = 0;  // after rounding to the model's stride
};

// YOLOv5's check_img_size: rounds `imgsz` up to a multiple of `stride` (at least 2 * stride)
// with a warning; throws UsageError for sizes that are not positive.
int check_img_size(int imgsz, int stride);

// Number of classes from a dataset YAML (`nc`, else the length of `names`).
int dataset_num_classes(const std::string& data_yaml, bool single_cls);

TrainSetup prepare_training(Options opt);

int train_main(int argc, char** argv);

}  // namespace yolo

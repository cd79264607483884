#pragma once
// AutoBatch (train --batch-size -1), as YOLOv5's check_train_batch_size: on CUDA, the training
// step's memory is profiled at batch sizes 1-16, a line fitted through it, and the batch that
// fills 80 % of the GPU's free memory chosen; on the CPU, 16.
#include <optional>
#include <string>
#include <vector>

#include "models/yolo.h"

namespace yolo {

// One profile and the device's memory when it was taken, in YOLOv5's units: memory per batch in
// GB (memory_reserved / 1e9), the device's figures in GiB.
struct AutoBatchProfile {
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16};
  std::vector<std::optional<double>> memory_gb;  // empty where that batch size failed (OOM)
  double total_gib = 0, reserved_gib = 0, allocated_gib = 0;
  std::string device = "CUDA:0";  // for the log line
};

struct AutoBatchChoice {
  int batch_size = 16;
  double fraction = 0;    // of the device's memory the choice is predicted to use
  bool fallback = false;  // the fit was unusable (no profile, or a batch outside 1-1024)
  std::string line;       // YOLOv5's "Using batch-size N for CUDA:0 6.24G/7.79G (80%)"
};

// YOLOv5's autobatch arithmetic on a recorded profile: a first-degree fit of memory against batch
// size, b = (free * fraction - intercept) / slope; below the first size that failed; `fallback`
// when the result is outside 1-1024.
AutoBatchChoice fit_batch_size(const AutoBatchProfile& profile, double fraction = 0.8,
                               int fallback = 16);

// Profiles `model` (train mode; forward and backward under autocast when `amp`) at `imgsz` on its
// CUDA device and returns the batch size to train with, logging YOLOv5's AutoBatch lines. On the
// CPU it logs that and returns 16. The model's gradients and BatchNorm statistics are left as
// they were.
int autobatch(DetectionModel& model, int imgsz, bool amp, const c10::Device& device);

}  // namespace yolo

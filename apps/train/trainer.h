#pragma once
// One training run on one process (CPU or one GPU), as YOLOv5 v7.0's train.py: data, model, EMA,
// loss, optimizer with warmup and schedule, gradient accumulation to a nominal batch of 64,
// per-epoch validation, results.csv, last.pt/best.pt, early stopping.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "utils/hyp.h"
#include "utils/options.h"

namespace yolo {

struct TrainSummary {
  std::string save_dir;
  int epochs_run = 0;
  double best_fitness = 0;
  std::array<double, 7> final_results{};  // P, R, mAP50, mAP50-95, val box/obj/cls loss
};

// Runs the whole training; throws on errors (UsageError for bad flags/values).
TrainSummary train(Options opt);

}  // namespace yolo

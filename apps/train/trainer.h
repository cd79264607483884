#pragma once
// One training run on one process (CPU or one GPU), as YOLOv5 v7.0's train.py: data, model, EMA,
// loss, optimizer with warmup and schedule, gradient accumulation to a nominal batch of 64,
// per-epoch validation, results.csv, last.pt/best.pt, early stopping.
#include <array>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "utils/hyp.h"
#include "utils/options.h"

namespace yolo {

struct TrainSummary {
  std::string save_dir;
  int epochs_run = 0;
  double best_fitness = 0;
  std::array<double, 7> final_results{};  // best.pt's P, R, mAP50, mAP50-95, val box/obj/cls loss
  std::array<double, 7> last_results{};   // the same from the last epoch's validation
};

struct TrainHooks {
  std::function<void(int epoch)> on_epoch_end;  // after the epoch's checkpoint is written
};

// Thrown when a stop was requested (Ctrl-C / SIGTERM): last.pt holds the state to resume from.
class TrainingInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Asks a running train() to stop after the current step and save last.pt. Async-signal-safe.
void request_stop();

// The most recent runs/**/last.pt (YOLOv5's get_latest_run); throws UsageError when none.
std::string latest_run(const std::string& search_dir = "runs");

// Runs the whole training, or continues one with opt.resume; throws on errors (UsageError for
// bad flags/values).
// Running out of GPU memory is reported with out_of_memory_message().
TrainSummary train(Options opt, const TrainHooks& hooks = {});

// What a CUDA out-of-memory error tells the user: the batch size and image size in force, the
// images per GPU, what to lower, and LibTorch's first line (`what`).
std::string out_of_memory_message(const Options& opt, int world_size, const std::string& what);

}  // namespace yolo

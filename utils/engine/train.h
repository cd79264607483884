#pragma once
// One training run, as YOLOv5 v7.0's train.py: train() sets the run up from its resolved
// configuration (train_setup.h), registers the rank-0 callbacks (train_callbacks.h) and the
// caller's, and runs the Trainer (trainer.h). docs/ARCHITECTURE.md shows the road from the command
// line to the loop.
#include <array>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "utils/engine/callbacks.h"
#include "utils/engine/train_config.h"

namespace yolo {

struct TrainSummary {
  std::string save_dir;
  int epochs_run = 0;
  double best_fitness = 0;
  std::array<double, 7> final_results{};  // best.pt's P, R, mAP50, mAP50-95, val box/obj/cls loss
  std::array<double, 7> last_results{};   // the same from the last epoch's validation
};

// Thrown when a stop was requested (Ctrl-C / SIGTERM): last.pt holds the state to resume from.
class TrainingInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Asks a running train() to stop after the current step and save last.pt. Async-signal-safe.
void request_stop();
bool stop_requested();
// Forgets a request: train() starts with none; so does each test that drives a Trainer itself.
void clear_stop_request();

// Runs the whole training, or continues one with --resume; throws on errors (UsageError for bad
// values). `callbacks` run on every rank, after the rank-0 ones (progress, results.csv,
// checkpoints, plots). Running out of GPU memory is reported with out_of_memory_message().
TrainSummary train(TrainConfig cfg, std::vector<std::unique_ptr<Callback>> callbacks = {});
// The same, with callbacks made once the run is set up (they may keep what `setup` says: the run
// folder, the class names, ...; `setup` outlives them).
struct TrainSetup;
using CallbackFactory =
    std::function<std::vector<std::unique_ptr<Callback>>(const TrainSetup& setup)>;
TrainSummary train(TrainConfig cfg, const CallbackFactory& make_callbacks);

// What a CUDA out-of-memory error tells the user: the batch size and image size in force, the
// images per GPU, what to lower, and LibTorch's first line (`what`).
std::string out_of_memory_message(const Options& opt, int world_size, const std::string& what);

}  // namespace yolo

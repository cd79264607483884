#pragma once
// yolo::train: one training run as the train program runs it (YOLOv5 v7.0's train.py), from the
// same flags, with callbacks on its events. Part of the public library (find_package(yolo_cpp),
// target yolo_cpp::yolo).
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace yolo {

class TrainConfig;  // the resolved configuration (internal)

// What the train program resolves from its command line: flags parsed and checked, a --resume's
// own options merged, bare config names (yolov5n.yaml, coco128.yaml, hyp.scratch-low.yaml) found,
// --weights read. Throws std::runtime_error naming the flag or file on bad input.
class TrainSettings {
 public:
  // train's flags, without the program name: {"--data", "coco128.yaml", "--epochs", "3"}.
  // --help, --version, --nproc-per-node and --evolve are the train program's alone.
  static TrainSettings from_args(const std::vector<std::string>& args);

  const std::string& data() const;     // the dataset YAML's path
  const std::string& cfg() const;      // the model YAML's path ("" when from --weights)
  const std::string& weights() const;  // "" when training from scratch
  int epochs() const;
  int batch_size() const;
  int imgsz() const;
  const std::string& device() const;

  // The configuration itself (for this library's own code).
  const TrainConfig& config() const { return *config_; }
  explicit TrainSettings(std::shared_ptr<const TrainConfig> config);

 private:
  std::shared_ptr<const TrainConfig> config_;
};

// One epoch's results after its validation: a row of results.csv.
struct EpochMetrics {
  int epoch = 0;   // 0-based
  int epochs = 0;  // in the run
  // The model family's three loss terms, as results.csv names them: box_loss, obj_loss, cls_loss
  // for YOLOv5's models; box_loss, cls_loss, dfl_loss for YOLOv8 and YOLO11 (whose obj_loss
  // stays 0). The losses below are filled by these names.
  std::array<std::string, 3> loss_names;
  double box_loss = 0, obj_loss = 0, cls_loss = 0, dfl_loss = 0;  // training, mean over the epoch
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  double val_box_loss = 0, val_obj_loss = 0, val_cls_loss = 0, val_dfl_loss = 0;
  // The model family's: 0.1 mAP50 + 0.9 mAP50-95 (YOLOv5), mAP50-95 (YOLOv8, YOLO11).
  double fitness = 0;
  bool is_best = false;  // the best fitness so far: best.pt is (re)written from this epoch
};

// Weights files written for an epoch, on disk when the callback runs.
struct CheckpointSaved {
  int epoch = 0;
  std::vector<std::string> files;  // e.g. runs/train/exp/weights/last.pt and best.pt
};

struct TrainResult {
  std::string save_dir;    // the run folder, e.g. runs/train/exp
  std::string best, last;  // weights files (best.pt, last.pt)
  int epochs_run = 0;
  double best_fitness = 0;
  // best.pt's final validation: P, R, mAP50, mAP50-95 (what the run ends by printing).
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
};

// Called on the training thread (rank 0 and every other rank under torchrun), after the train
// program's own logging, results.csv and checkpoints for the same event. An exception thrown by
// a callback ends the run as any error does (last.pt keeps the last completed epoch).
struct TrainCallbacks {
  std::function<void(const std::string& save_dir)> on_train_start;
  std::function<void(const EpochMetrics&)> on_epoch_end;
  std::function<void(const CheckpointSaved&)> on_checkpoint_saved;  // rank 0 only: it saves
  std::function<void(const TrainResult&)> on_train_end;
};

// Trains, or continues a run with --resume. Returns when the run ends; throws std::runtime_error
// on errors (messages name the flag, file or line). Ctrl-C handling is the caller's: call
// request_stop() to end after the current step with last.pt saved (train then throws a
// std::runtime_error naming the last.pt to --resume from).
TrainResult train(const TrainSettings& settings, const TrainCallbacks& callbacks = {});

// Asks a running train() to stop after the current step and save last.pt. Async-signal-safe.
void request_stop();

}  // namespace yolo

#pragma once
// The rank-0 side of training: console progress, results.csv, checkpoints and plots, each a
// Callback the Trainer calls at its events. train() registers them on rank 0 only.
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "utils/core/io/results_csv.h"
#include "utils/engine/callbacks.h"
#include "utils/engine/run_paths.h"

namespace yolo {

struct Checkpoint;
class CheckpointWriter;
class EventWriter;
class ProgressBar;
class Trainer;

// YOLOv5's console: the epoch header, a progress line per batch (redrawn in place on a terminal),
// the epoch's timing, the validation tables, the run's ETA (after its first epoch, then every
// tenth) and the closing line.
class ProgressLog : public Callback {
 public:
  ProgressLog(std::vector<std::string> names, LossNames losses);
  ~ProgressLog() override;
  void on_train_epoch_start(int epoch) override;
  void on_train_batch_end(const BatchEvent& e) override;
  void on_train_epoch_end(int epoch, const EpochTiming& t) override;
  void on_val_end(const ValResult& r, bool final_validation) override;
  void on_fit_epoch_end(const EpochReport& r) override;
  void on_train_end(int epochs_run, double seconds) override;

 private:
  std::vector<std::string> names_;
  LossNames losses_;
  std::string line_;
  std::unique_ptr<ProgressBar> bar_;  // this epoch's
  int64_t images_ = 0;
  int epochs_done_ = 0;      // in this process (a resumed run starts again at 0)
  double first_start_ = -1;  // steady-clock seconds at this process's first epoch start
};

// The line ProgressLog prints after an epoch: how long the `left` remaining epochs should take
// at the mean pace of the `done` so far (`elapsed` seconds, validation included) and the local
// wall-clock time they should end at (`now`, seconds since the epoch).
std::string run_eta_line(int done, int left, double elapsed, double now);

// results.csv: one row per epoch in YOLOv5's columns.
class ResultsLog : public Callback {
 public:
  ResultsLog(std::string csv_path, LossNames losses)
      : path_(std::move(csv_path)), losses_(std::move(losses)) {}
  void on_fit_epoch_end(const EpochReport& r) override;

 private:
  std::string path_;
  LossNames losses_;
};

// TensorBoard event files in the run folder, results.csv's values under the same tags, stepped by
// epoch (as YOLOv5's TensorBoard logger).
class TensorBoardLog : public Callback {
 public:
  TensorBoardLog(const std::string& save_dir, LossNames losses);
  ~TensorBoardLog() override;
  void on_fit_epoch_end(const EpochReport& r) override;

 private:
  std::unique_ptr<EventWriter> writer_;
  LossNames losses_;
};

// last.pt every epoch (only the final one with --nosave), best.pt when the fitness improves,
// epochN.pt every --save-period epochs; last.pt on a stop; optimizer stripped at the end. The
// files are written by a CheckpointWriter: an epoch's save only snapshots the state, and the
// writes are waited for where the files must be on disk (a stop, the end, or the destructor
// when the run ends by an exception). A failed write stops the run at the next epoch start,
// save or end with its own message.
class Checkpointer : public Callback {
 public:
  // `sink` replaces write_file_atomic (tests). `background` = false waits for each epoch's write
  // (CPU training, whose kernels keep every core busy: a writer beside them only slows them).
  // `saved` hears of each epoch's files once they are on disk: at once when writes are waited
  // for, else at the next epoch start that finds them written, or at the end.
  using Saved = std::function<void(int epoch, const std::vector<std::string>& files)>;
  Checkpointer(RunPaths paths, std::function<Checkpoint(int)> make, bool nosave, int save_period,
               std::function<void(const std::string&, const std::string&)> sink = {},
               bool background = true, Saved saved = {});
  ~Checkpointer() override;
  void on_train_epoch_start(int epoch) override;
  void on_fit_epoch_end(const EpochReport& r) override;
  void on_interrupt(int done_epoch, bool epoch_complete) override;
  void on_train_end(int epochs_run, double seconds) override;

 private:
  RunPaths paths_;
  std::function<Checkpoint(int)> make_;
  bool nosave_;
  int save_period_;
  bool background_;
  Saved saved_;
  std::vector<std::pair<int, std::vector<std::string>>> unannounced_;
  std::unique_ptr<CheckpointWriter> writer_;
  void announce();  // tells `saved_` of the files written, once nothing is pending
};

// labels.jpg, train_batch0-2.jpg and results.png.
class RunPlots : public Callback {
 public:
  RunPlots(std::string save_dir, std::vector<std::string> names,
           std::vector<std::array<float, 5>> labels);
  void on_train_start() override;
  void on_train_batch_end(const BatchEvent& e) override;
  void on_train_end(int epochs_run, double seconds) override;

 private:
  std::string save_dir_;
  std::vector<std::string> names_;
  std::vector<std::array<float, 5>> labels_;  // cls, cx, cy, w, h of every training label
};

// What rank 0 registers: progress, results.csv, TensorBoard, checkpoints and (unless --noplots)
// plots.
void add_rank0_callbacks(Trainer& trainer);

}  // namespace yolo

#pragma once
// The training loop over a set-up run (train_setup.h). Its epoch reads as its phases: train one
// epoch (warmup, forward, loss, backward, step, EMA), validate, decide best, report, decide
// whether to go on. train() (train.h) is the way in.
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "utils/core/runtime/grad_scaler.h"
#include "utils/engine/callbacks.h"
#include "utils/engine/optimizer_step.h"
#include "utils/engine/phase_clock.h"
#include "utils/engine/running_loss.h"
#include "utils/engine/train.h"
#include "utils/engine/train_setup.h"

namespace yolo {

struct Checkpoint;

// Under AMP, the batches in a row with a non-finite loss (each skipped by the gradient scaler)
// that end the run: by then the scale has halved from 2^16 to 1, so the overflow is not one
// that loss scaling causes or cures.
constexpr int64_t kNonFiniteStepsToStop = 16;

// YOLOv5's EarlyStopping: stop after `patience` epochs without a fitness improvement.
class EarlyStopping {
 public:
  explicit EarlyStopping(int patience) : patience_(patience > 0 ? patience : 1 << 30) {}
  bool operator()(int epoch, double fitness);
  bool possible_stop = false;  // the next epoch may be the last: validate it

 private:
  int patience_;
  int best_epoch_ = 0;
  double best_fitness_ = 0.0;
};

// The training loop over a set-up run. Every rank runs it; what only rank 0 does (progress,
// results.csv, checkpoints, plots) is done by the callbacks added there.
class Trainer {
 public:
  // `timing`: how the step's phases are timed (default: CUDA events on a GPU, host time else).
  explicit Trainer(TrainSetup setup, std::optional<PhaseClock::Mode> timing = std::nullopt);
  void add_callback(std::unique_ptr<Callback> cb) { callbacks_.add(std::move(cb)); }
  // Tells every callback that `files` of `epoch` are on disk (the Checkpointer calls it).
  void model_saved(int epoch, const std::vector<std::string>& files) {
    callbacks_.model_save(epoch, files);
  }
  TrainSummary fit();
  // The state after `done_epoch` for last.pt/best.pt (rank 0: it holds the EMA).
  Checkpoint make_checkpoint(int done_epoch) const;
  const TrainSetup& setup() const { return s_; }
  // The step's phase clock (benchmarks flush it to read exact totals mid-epoch).
  PhaseClock& phase_clock() { return clock_; }

 private:
  // One epoch's mean box, obj and cls loss.
  std::array<double, 3> train_one_epoch(int epoch);
  void warmup(int64_t ni, int epoch);
  at::Tensor multi_scale(const at::Tensor& imgs, int64_t ni) const;
  void optimizer_step(int64_t ni, EpochTiming& t);
  void check_stop(int epoch, int64_t i, bool read);
  std::array<double, 3> step_lr(int epoch);
  void share_ema();
  void validate(EpochReport& r);
  void decide_best(EpochReport& r);
  enum class Next { kContinue, kEarlyStop, kInterrupt };
  // The same on every rank: rank 0 decides.
  Next decide_next(int epoch, bool early_stop);
  void final_validation(TrainSummary& summary);
  void log_next_steps() const;
  void resample_images(int epoch);

  TrainSetup s_;
  Callbacks callbacks_;
  GradScaler scaler_;
  std::unique_ptr<OptimizerStep> stepper_;
  PhaseClock clock_;
  RunningLoss running_loss_;
  std::vector<at::Tensor> params_;
  int64_t nb_ = 0, nw_ = 0;  // batches per epoch, warmup batches
  int accumulate_ = 1;
  int64_t last_opt_step_ = -1;
  // DDP's broadcast_buffers: before a forward that follows a syncing one (or the first), not after
  // a no_sync one, whose buffers stay this rank's until the step.
  bool buffers_due_ = true;
  double best_fitness_ = 0.0;
  std::array<double, 7> results_{};  // the last validation's metrics
  std::vector<double> maps_;         // per-class mAP50-95 of the last validation
  EarlyStopping stopper_;
  bool early_stop_ = false;
};

}  // namespace yolo

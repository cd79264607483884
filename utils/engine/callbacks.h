#pragma once
// What the Trainer tells the outside world, and nothing more: events at fixed points of the run.
// The loop calls them; what they do (progress, results.csv, checkpoints, plots) lives in the
// callbacks, which train() registers on rank 0 only (train_callbacks.h).
#include <ATen/core/Tensor.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace yolo {

struct ValResult;

struct EpochTiming;

// One training batch, after its backward pass and optimizer step (if it stepped).
struct BatchEvent {
  int epoch = 0, epochs = 0;
  int64_t i = 0, nb = 0, ni = 0;       // batch of the epoch, batches per epoch, batches since start
  const at::Tensor* images = nullptr;  // (b, 3, h, w) as trained, after multi-scale
  const at::Tensor* targets = nullptr;
  const std::vector<std::string>* paths = nullptr;
  const at::Tensor* mean_loss = nullptr;  // (3) running mean of box, obj, cls loss (CPU)
  double gpu_mem_gb = 0;                  // reserved CUDA memory, 0 on CPU
  const EpochTiming* timing = nullptr;    // the epoch's time so far, this batch included
};

// Where one epoch's time went on this rank, in seconds. `data` is host time waiting for batches;
// the step's phases are the Trainer's PhaseClock: host time on the CPU, GPU time between events
// on CUDA (summed as the GPU passes them and when the epoch ends, so they lag while it runs).
// `transfer` is the batch's way onto the device: the copy, uint8 to float, --augment-device
// rendering and the multi-scale resize.
struct EpochTiming {
  int64_t images = 0;  // this rank's while the epoch runs, all ranks' at its end
  int64_t optimizer_steps = 0;
  double seconds = 0, data = 0, transfer = 0, forward = 0, loss = 0, backward = 0, optimizer = 0,
         sync = 0;
  bool distributed = false;
};

// One epoch's outcome after validation: a row of results.csv and what checkpoints decide on.
struct EpochReport {
  int epoch = 0, epochs = 0;
  std::array<double, 3> train_loss{};  // mean box, obj, cls loss
  std::array<double, 7> metrics{};     // P, R, mAP50, mAP50-95, val box, obj, cls loss
  std::array<double, 3> lr{};          // per parameter group, as used in the epoch
  double fitness = 0;
  bool is_best = false;
  bool final_epoch = false;
  bool stop_requested = false;  // Ctrl-C / SIGTERM seen: save whatever --nosave says
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_start() {}  // data, model and loaders are ready
  virtual void on_train_epoch_start(int epoch) {}
  virtual void on_train_batch_end(const BatchEvent& e) {}
  virtual void on_train_epoch_end(int epoch, const EpochTiming& t) {}
  virtual void on_val_end(const ValResult& r, bool final_validation) {}
  virtual void on_fit_epoch_end(const EpochReport& r) {}
  // A stop was requested after `done_epoch` (mid-epoch: `epoch_complete` false, the weights are
  // part-way into the next epoch).
  virtual void on_interrupt(int done_epoch, bool epoch_complete) {}
  // Weights files written for `epoch` (last.pt, best.pt, epochN.pt) are on disk.
  virtual void on_model_save(int epoch, const std::vector<std::string>& files) {}
  // The epochs are done (before best.pt's final validation, which reports through on_val_end).
  virtual void on_train_end(int epochs_run, double seconds) {}
};

// The registered callbacks, called in the order they were added.
class Callbacks {
 public:
  void add(std::unique_ptr<Callback> cb) { list_.push_back(std::move(cb)); }
  void train_start() {
    for (auto& c : list_) c->on_train_start();
  }
  void train_epoch_start(int epoch) {
    for (auto& c : list_) c->on_train_epoch_start(epoch);
  }
  void train_batch_end(const BatchEvent& e) {
    for (auto& c : list_) c->on_train_batch_end(e);
  }
  void train_epoch_end(int epoch, const EpochTiming& t) {
    for (auto& c : list_) c->on_train_epoch_end(epoch, t);
  }
  void val_end(const ValResult& r, bool final) {
    for (auto& c : list_) c->on_val_end(r, final);
  }
  void fit_epoch_end(const EpochReport& r) {
    for (auto& c : list_) c->on_fit_epoch_end(r);
  }
  void interrupt(int done_epoch, bool complete) {
    for (auto& c : list_) c->on_interrupt(done_epoch, complete);
  }
  void model_save(int epoch, const std::vector<std::string>& files) {
    for (auto& c : list_) c->on_model_save(epoch, files);
  }
  void train_end(int epochs_run, double seconds) {
    for (auto& c : list_) c->on_train_end(epochs_run, seconds);
  }

 private:
  std::vector<std::unique_ptr<Callback>> list_;
};

}  // namespace yolo

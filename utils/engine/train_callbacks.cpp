#include "utils/engine/train_callbacks.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "data/dataset.h"
#include "utils/core/format.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/io/results_csv.h"
#include "utils/core/log.h"
#include "utils/core/progress.h"
#include "utils/engine/checkpoint_writer.h"
#include "utils/engine/tb_events.h"
#include "utils/engine/trainer.h"
#include "utils/eval/model_family.h"
#include "utils/eval/validator.h"
#include "utils/viz/plots.h"

namespace fs = std::filesystem;

namespace yolo {

ProgressLog::~ProgressLog() = default;

ProgressLog::ProgressLog(std::vector<std::string> names, LossNames losses)
    : names_(std::move(names)), losses_(std::move(losses)) {}

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string run_eta_line(int done, int left, double elapsed, double now) {
  const double per_epoch = elapsed / std::max(done, 1);
  const double eta = per_epoch * left;
  const std::time_t end = static_cast<std::time_t>(now + eta);
  std::tm tm{};
  localtime_r(&end, &tm);
  char clock[16];
  std::strftime(clock, sizeof(clock), "%H:%M", &tm);
  const double minutes = eta / 60;
  return std::to_string(done) + (done == 1 ? " epoch" : " epochs") + " in " +
         format_duration(elapsed) + " (" + format_number("%.1f", per_epoch) +
         " s each, validation included); ETA for the " + std::to_string(left) + " left: " +
         (minutes < 1 ? format_number("%.0f", eta) + " s"
                      : format_number("%.1f", minutes) + " min") +
         ", ending about " + clock;
}

void ProgressLog::on_train_epoch_start(int epoch) {
  if (first_start_ < 0) first_start_ = steady_seconds();
  bar_ = std::make_unique<ProgressBar>(1);  // the batch count arrives with the first batch
  images_ = 0;
  char head[128];
  std::snprintf(head, sizeof(head), "\n%11s%11s%11s%11s%11s%11s%11s", "Epoch", "GPU_mem",
                losses_[0].c_str(), losses_[1].c_str(), losses_[2].c_str(), "Instances", "Size");
  log_info(head);
}

void ProgressLog::on_train_batch_end(const BatchEvent& e) {
  char buf[256], mem[32];
  std::snprintf(mem, sizeof(mem), "%.3gG", e.gpu_mem_gb);  // YOLOv5: f'{reserved / 1E9:.3g}G'
  const at::Tensor& m = *e.mean_loss;
  std::snprintf(buf, sizeof(buf), "%11s%11s%11.4g%11.4g%11.4g%11lld%11lld",
                (std::to_string(e.epoch) + "/" + std::to_string(e.epochs - 1)).c_str(), mem,
                m[0].item<double>(), m[1].item<double>(), m[2].item<double>(),
                static_cast<long long>(e.targets->size(0)),
                static_cast<long long>(e.images->size(3)));
  line_ = buf;
  images_ += e.images->size(0);
  bar_->set_total(e.nb);
  bar_->update(e.i + 1, line_, images_);
}

void ProgressLog::on_train_epoch_end(int epoch, const EpochTiming& t) {
  if (bar_) bar_->close(line_, images_);
  const auto f1 = [](double v) { return format_number("%.1f", v); };
  log_info(
      "  " + std::to_string(t.images) + " images in " + f1(t.seconds) + " s (" +
      f1(t.images / std::max(t.seconds, 1e-9)) + " img/s): data " + f1(t.data) + " s, to device " +
      f1(t.transfer) + " s, forward+loss " + f1(t.forward + t.loss) + " s, backward " +
      f1(t.backward) + " s, optimizer+EMA " + f1(t.optimizer) + " s" +
      (t.distributed ? ", all-reduce wait " + format_number("%.2f", t.sync) + " s (rank 0)" : ""));
}

void ProgressLog::on_val_end(const ValResult& r, bool final_validation) {
  log_info(format_val_table(r, names_, final_validation, /*header=*/false));  // the bar showed it
}

void ProgressLog::on_fit_epoch_end(const EpochReport& r) {
  ++epochs_done_;
  const int left = r.epochs - 1 - r.epoch;
  if (left <= 0 || r.stop_requested || (epochs_done_ != 1 && epochs_done_ % 10 != 0)) return;
  const double now = static_cast<double>(std::time(nullptr));
  log_info(run_eta_line(epochs_done_, left, steady_seconds() - first_start_, now));
}

void ProgressLog::on_train_end(int epochs_run, double seconds) {
  log_info("\n" + std::to_string(epochs_run) + " epochs completed in " +
           format_number("%.3f", seconds / 3600) + " hours.");
}

namespace {

// An epoch's row of results.csv: epoch, train losses, val metrics and losses, learning rates.
std::vector<double> results_row(const EpochReport& r) {
  std::vector<double> row{static_cast<double>(r.epoch)};
  row.insert(row.end(), r.train_loss.begin(), r.train_loss.end());
  row.insert(row.end(), r.metrics.begin(), r.metrics.end());
  row.insert(row.end(), r.lr.begin(), r.lr.end());
  return row;
}

}  // namespace

void ResultsLog::on_fit_epoch_end(const EpochReport& r) {
  append_csv_row(path_, results_csv_columns(losses_), results_row(r));
}

TensorBoardLog::~TensorBoardLog() = default;

TensorBoardLog::TensorBoardLog(const std::string& save_dir, LossNames losses)
    : writer_(std::make_unique<EventWriter>(save_dir)), losses_(std::move(losses)) {
  log_info("TensorBoard: Start with 'tensorboard --logdir " +
           fs::path(save_dir).parent_path().string() + "', view at http://localhost:6006/");
}

void TensorBoardLog::on_fit_epoch_end(const EpochReport& r) {
  if (!writer_) return;
  const std::vector<double> row = results_row(r);
  const auto tags = results_csv_columns(losses_);  // the epoch is the step, the rest are tags
  try {
    for (size_t i = 1; i < row.size(); ++i) {
      writer_->add_scalar(tags[i], static_cast<float>(row[i]), r.epoch);
    }
  } catch (const std::exception& e) {
    // A side log: its failure (disk full) must not stop the run before last.pt is saved.
    log_warn(std::string("TensorBoard: ") + e.what() + "; no more events are written " +
             "(results.csv has every value)");
    writer_.reset();
  }
}

Checkpointer::Checkpointer(RunPaths paths, std::function<Checkpoint(int)> make, bool nosave,
                           int save_period,
                           std::function<void(const std::string&, const std::string&)> sink,
                           bool background, Saved saved)
    : paths_(std::move(paths)),
      make_(std::move(make)),
      nosave_(nosave),
      save_period_(save_period),
      background_(background),
      saved_(std::move(saved)),
      writer_(std::make_unique<CheckpointWriter>(std::move(sink))) {}

Checkpointer::~Checkpointer() = default;  // the writer finishes its queue

void Checkpointer::announce() {
  if (writer_->pending() > 0) return;
  std::vector<std::pair<int, std::vector<std::string>>> done;
  done.swap(unannounced_);
  if (!saved_) return;
  for (const auto& [epoch, files] : done) saved_(epoch, files);
}

void Checkpointer::on_train_epoch_start(int epoch) {
  writer_->check();  // a write that failed in the background stops the run before another epoch
  announce();
}

void Checkpointer::on_fit_epoch_end(const EpochReport& r) {
  if (nosave_ && !r.final_epoch && !r.stop_requested) return;
  std::vector<std::string> files{paths_.last};
  if (r.is_best) files.push_back(paths_.best);
  if (save_period_ > 0 && r.epoch % save_period_ == 0) {
    files.push_back(paths_.epoch_checkpoint(r.epoch));
  }
  writer_->save(make_(r.epoch), files);
  unannounced_.emplace_back(r.epoch, std::move(files));
  if (!background_) writer_->flush();
  announce();
}

void Checkpointer::on_interrupt(int done_epoch, bool epoch_complete) {
  // A complete epoch was saved by on_fit_epoch_end unless --nosave skipped it. Either way the
  // save is on disk before the program reports the stop and exits.
  if (!epoch_complete || nosave_) {
    writer_->save(make_(done_epoch), {paths_.last});
    unannounced_.emplace_back(done_epoch, std::vector<std::string>{paths_.last});
  }
  writer_->flush();
  announce();
}

void Checkpointer::on_train_end(int epochs_run, double seconds) {
  writer_->flush();  // before the files are stripped and best.pt is validated
  announce();
  // YOLOv5 strips the final weights (the periodic epochN.pt files keep everything).
  for (const std::string& f : {paths_.last, paths_.best}) {
    if (fs::exists(f)) strip_optimizer(f);
  }
}

RunPlots::RunPlots(std::string save_dir, std::vector<std::string> names,
                   std::vector<std::array<float, 5>> labels)
    : save_dir_(std::move(save_dir)), names_(std::move(names)), labels_(std::move(labels)) {}

void RunPlots::on_train_start() {
  plot_labels(labels_, names_, (fs::path(save_dir_) / "labels.jpg").string());
}

void RunPlots::on_train_batch_end(const BatchEvent& e) {
  if (e.ni >= 3) return;
  plot_images(*e.images, *e.targets, *e.paths, names_,
              (fs::path(save_dir_) / ("train_batch" + std::to_string(e.ni) + ".jpg")).string());
}

void RunPlots::on_train_end(int epochs_run, double seconds) {
  const fs::path dir(save_dir_);
  plot_results((dir / "results.csv").string(), (dir / "results.png").string());
}

void add_rank0_callbacks(Trainer& trainer) {
  const TrainSetup& s = trainer.setup();
  const LossNames& losses = model_family(*s.model).loss_names;
  trainer.add_callback(std::make_unique<ProgressLog>(s.names, losses));
  trainer.add_callback(std::make_unique<ResultsLog>(s.paths.results_csv(), losses));
  trainer.add_callback(std::make_unique<TensorBoardLog>(s.paths.save_dir, losses));
  trainer.add_callback(std::make_unique<Checkpointer>(
      s.paths, [&trainer](int epoch) { return trainer.make_checkpoint(epoch); }, s.opt.nosave,
      s.opt.save_period, nullptr, /*background=*/!s.dev.device.is_cpu(),
      [&trainer](int epoch, const std::vector<std::string>& files) {
        trainer.model_saved(epoch, files);
      }));
  if (s.opt.noplots) return;
  std::vector<std::array<float, 5>> labels;
  for (const auto& ls : s.train_set->labels()) {
    for (const auto& l : ls) labels.push_back({l.cls, l.cx, l.cy, l.w, l.h});
  }
  trainer.add_callback(std::make_unique<RunPlots>(s.paths.save_dir, s.names, std::move(labels)));
}

}  // namespace yolo

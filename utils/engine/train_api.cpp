// The public training API (include/yolo/train.h) over the train program's own road: its flag
// parser and resolve(), and train() with a callback that reports to the caller's functions.
#include <utility>

#include "utils/core/errors.h"
#include "utils/engine/train.h"
#include "utils/engine/train_config.h"
#include "utils/engine/train_options.h"
#include "utils/engine/train_setup.h"
#include "utils/eval/model_family.h"
#include "yolo/train.h"

namespace yolo {

TrainSettings::TrainSettings(std::shared_ptr<const TrainConfig> config)
    : config_(std::move(config)) {}

TrainSettings TrainSettings::from_args(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"train"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  const CommandLine cl = parse_train_args(static_cast<int>(argv.size()), argv.data());
  if (cl.help || cl.version) throw UsageError("--help and --version are the train program's");
  if (cl.opt.nproc_per_node != 0) {
    throw UsageError(
        "--nproc-per-node: the train program's launcher; in a program of your own "
        "start the processes with torchrun");
  }
  if (cl.opt.evolve > 0) throw UsageError("--evolve: run the train program for evolution");
  return TrainSettings(std::make_shared<const TrainConfig>(resolve(cl.opt)));
}

const std::string& TrainSettings::data() const { return config_->opt().data; }
const std::string& TrainSettings::cfg() const { return config_->opt().cfg; }
const std::string& TrainSettings::weights() const { return config_->opt().weights; }
int TrainSettings::epochs() const { return config_->opt().epochs; }
int TrainSettings::batch_size() const { return config_->opt().batch_size; }
int TrainSettings::imgsz() const { return config_->opt().imgsz; }
const std::string& TrainSettings::device() const { return config_->opt().device; }

namespace {
// The caller's functions as a Trainer callback.
class UserCallbacks : public Callback {
 public:
  UserCallbacks(const TrainCallbacks& cb, std::string save_dir, LossNames loss_names)
      : cb_(cb), save_dir_(std::move(save_dir)), loss_names_(std::move(loss_names)) {}
  void on_train_start() override {
    if (cb_.on_train_start) cb_.on_train_start(save_dir_);
  }
  void on_fit_epoch_end(const EpochReport& r) override {
    if (!cb_.on_epoch_end) return;
    EpochMetrics m;
    m.epoch = r.epoch;
    m.epochs = r.epochs;
    m.loss_names = loss_names_;
    for (size_t k = 0; k < 3; ++k) {
      const std::string& name = loss_names_[k];
      const double train = r.train_loss[k], val = r.metrics[4 + k];
      if (name == "box_loss") m.box_loss = train, m.val_box_loss = val;
      if (name == "obj_loss") m.obj_loss = train, m.val_obj_loss = val;
      if (name == "cls_loss") m.cls_loss = train, m.val_cls_loss = val;
      if (name == "dfl_loss") m.dfl_loss = train, m.val_dfl_loss = val;
    }
    m.precision = r.metrics[0];
    m.recall = r.metrics[1];
    m.map50 = r.metrics[2];
    m.map50_95 = r.metrics[3];
    m.fitness = r.fitness;
    m.is_best = r.is_best;
    cb_.on_epoch_end(m);
  }
  void on_model_save(int epoch, const std::vector<std::string>& files) override {
    if (cb_.on_checkpoint_saved) cb_.on_checkpoint_saved({epoch, files});
  }

 private:
  const TrainCallbacks& cb_;
  std::string save_dir_;
  LossNames loss_names_;
};
}  // namespace

TrainResult train(const TrainSettings& settings, const TrainCallbacks& callbacks) {
  RunPaths paths;
  const TrainSummary s = train(settings.config(), [&](const TrainSetup& setup) {
    paths = setup.paths;
    std::vector<std::unique_ptr<Callback>> list;
    list.push_back(std::make_unique<UserCallbacks>(callbacks, setup.paths.save_dir,
                                                   model_family(*setup.model).loss_names));
    return list;
  });
  TrainResult r;
  r.save_dir = s.save_dir;
  r.best = paths.best.empty() ? s.save_dir + "/weights/best.pt" : paths.best;
  r.last = paths.last.empty() ? s.save_dir + "/weights/last.pt" : paths.last;
  r.epochs_run = s.epochs_run;
  r.best_fitness = s.best_fitness;
  r.precision = s.final_results[0];
  r.recall = s.final_results[1];
  r.map50 = s.final_results[2];
  r.map50_95 = s.final_results[3];
  if (callbacks.on_train_end) callbacks.on_train_end(r);
  return r;
}

}  // namespace yolo

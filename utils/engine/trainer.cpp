#include "utils/engine/trainer.h"

#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <random>

#include "data/dataset.h"
#include "data/loader.h"
#include "models/weights.h"
#include "utils/core/cpu_threads.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/stopwatch.h"
#include "utils/distributed/data_parallel.h"
#include "utils/distributed/distributed.h"
#include "utils/distributed/grad_sync.h"
#include "utils/engine/ema.h"
#include "utils/engine/optim.h"
#include "utils/engine/train_callbacks.h"
#include "utils/eval/loss.h"
#include "utils/eval/metrics.h"
#include "utils/eval/model_family.h"
#include "utils/eval/validator.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {
std::atomic<bool> g_stop{false};
}  // namespace

void request_stop() { g_stop.store(true); }
bool stop_requested() { return g_stop.load(); }
void clear_stop_request() { g_stop.store(false); }

std::string out_of_memory_message(const Options& opt, int world_size, const std::string& what) {
  const int per_gpu = opt.batch_size / std::max(world_size, 1);
  return "CUDA out of memory training with --batch-size " + std::to_string(opt.batch_size) + " (" +
         std::to_string(per_gpu) + " images per GPU) at --imgsz " + std::to_string(opt.imgsz) +
         ": lower --batch-size (e.g. --batch-size " +
         std::to_string(std::max(opt.batch_size / 2, 1)) +
         ") or --imgsz, or use a smaller --cfg; weights/last.pt, if any, is unchanged (" +
         what.substr(0, what.find('\n')) + ")";
}

bool EarlyStopping::operator()(int epoch, double fitness) {
  if (fitness >= best_fitness_) {
    best_epoch_ = epoch;
    best_fitness_ = fitness;
  }
  const int delta = epoch - best_epoch_;
  possible_stop = delta >= patience_ - 1;
  const bool stop = delta >= patience_;
  if (stop) {
    log_info("Stopping training early as no improvement observed in last " +
             std::to_string(patience_) + " epochs. Best results observed at epoch " +
             std::to_string(best_epoch_) + ", best model saved as best.pt.");
  }
  return stop;
}

Trainer::Trainer(TrainSetup setup, std::optional<PhaseClock::Mode> timing)
    : s_(std::move(setup)),
      scaler_(s_.amp),
      clock_(timing.value_or(PhaseClock::default_mode(s_.dev.device)), s_.dev.device),
      running_loss_(s_.dev.device),
      last_opt_step_(s_.resume.last_opt_step),
      best_fitness_(s_.resume.best_fitness),
      maps_(s_.nc, 0.0),
      stopper_(s_.loop.patience) {
  params_ = s_.model->parameters();
  stepper_ = std::make_unique<OptimizerStep>(*s_.optimizer, s_.loop.optimizer,
                                             OptimizerStep::default_kernel(s_.dev.device));
  nb_ = static_cast<int64_t>(s_.train_loader->num_batches());
  nw_ = warmup_batches(model_family(*s_.model).warmup, s_.schedule.warmup_epochs, s_.loop.epochs,
                       nb_);
}

Checkpoint Trainer::make_checkpoint(int done_epoch) const {
  Checkpoint ck;
  ck.epoch = done_epoch;
  ck.best_fitness = best_fitness_;
  ck.model = state_dict(*s_.ema_model);
  ck.train_model = state_dict(*s_.model);
  ck.last_opt_step = last_opt_step_;
  stepper_->sync_state();
  ck.optimizer = optimizer_state(*s_.optimizer, s_.loop.optimizer);
  ck.ema_updates = s_.ema->updates();
  ck.opt = s_.opt_text;
  ck.hyp = s_.hyp_text;
  ck.model_yaml = s_.model_yaml_text;
  ck.nc = s_.nc;
  ck.names = s_.names;
  return ck;
}

TrainSummary Trainer::fit() {
  const LoopConfig& loop = s_.loop;
  const std::string& save_dir = s_.paths.save_dir;
  TrainSummary summary;
  summary.save_dir = save_dir;
  log_info("Image sizes " + std::to_string(s_.imgsz) + " train, " + std::to_string(s_.imgsz) +
           " val\nUsing " + std::to_string(s_.train_loader->workers()) +
           " dataloader workers\nLogging results to " + one_line(save_dir) +
           "\nStarting training for " + std::to_string(loop.epochs) + " epochs...");
  callbacks_.train_start();
  const Stopwatch clock;
  for (int epoch = s_.resume.start_epoch; epoch < loop.epochs; ++epoch) {
    EpochReport report{epoch, loop.epochs};
    report.train_loss = train_one_epoch(epoch);
    report.lr = step_lr(epoch);
    validate(report);
    decide_best(report);
    callbacks_.fit_epoch_end(report);  // results.csv, last.pt/best.pt
    summary.epochs_run = epoch + 1;
    summary.last_results = results_;
    const Next next = decide_next(epoch, early_stop_);
    if (next == Next::kInterrupt) {
      throw TrainingInterrupted("training stopped after epoch " + std::to_string(epoch) +
                                "; resume with --resume " + shell_word(s_.paths.last));
    }
    if (next == Next::kEarlyStop) break;
  }
  callbacks_.train_end(summary.epochs_run, clock.seconds());
  final_validation(summary);
  s_.dist.from_rank0("finished", "done");
  summary.best_fitness = best_fitness_;
  log_info("Results saved to " + one_line(save_dir));
  log_next_steps();
  return summary;
}

std::array<double, 3> Trainer::train_one_epoch(int epoch) {
  s_.model->train();
  resample_images(epoch);
  if (!s_.batch_source) s_.train_loader->start_epoch(epoch);
  if (const int64_t close = s_.train_set ? s_.train_set->options().close_mosaic_epoch : -1;
      close >= 0 && (epoch == close || (epoch > close && epoch == s_.resume.start_epoch))) {
    log_info("Closing dataloader mosaic: epochs " + std::to_string(close + 1) + " to " +
             std::to_string(s_.opt.epochs) + " train without it (--close-mosaic)");
  }
  const torch::Device device = s_.dev.device;
  running_loss_.start_epoch();
  s_.loss->set_epoch(epoch, s_.loop.epochs);  // YOLO26's branch weights follow the epochs
  stepper_->zero_grad();
  callbacks_.train_epoch_start(epoch);
  EpochTiming timing;
  timing.distributed = s_.dist.active();
  accumulate_ = s_.schedule.accumulate;
  const int world = s_.dist.world_size();
  const Stopwatch epoch_clock;
  for (int64_t i = 0;; ++i) {
    const Stopwatch data_clock;
    std::optional<Batch> batch = s_.batch_source ? s_.batch_source() : s_.train_loader->next();
    timing.data += data_clock.seconds();
    if (!batch) break;
    cpu_threads_tick();
    const int64_t ni = i + nb_ * epoch;
    clock_.start();
    // uint8 travels, float arrives; with --augment-device cuda the batch is rendered there
    at::Tensor imgs = batch_images_to_device(*batch, device);
    const at::Tensor targets = batch->targets.to(device, true);
    timing.images += imgs.size(0);
    if (nw_ > 0 && ni <= nw_) warmup(ni, epoch);
    if (s_.loop.multi_scale) imgs = multi_scale(imgs, ni);
    clock_.lap(&timing.transfer);
    const bool stepping = ni - last_opt_step_ >= accumulate_;
    if (s_.grad_sync) s_.grad_sync->set_sync(stepping);  // DDP's no_sync on accumulating batches
    if (!s_.ddp_buffers.empty() && buffers_due_) {
      broadcast_coalesced(*s_.dist.group(), s_.ddp_buffers, 0);
    }
    buffers_due_ = stepping;
    LossResult loss;
    {
      AutocastScope autocast(s_.amp);
      const std::vector<at::Tensor> preds =
          s_.dp ? s_.dp->forward(imgs) : s_.model->forward_raw(imgs);
      clock_.lap(&timing.forward);
      // The host copy: the loss moves it, and the anchor-free one pads it per image there.
      loss = (*s_.loss)(preds, batch->targets);
      clock_.lap(&timing.loss);
    }
    // DDP averages gradients over ranks; YOLOv5 scales the loss by WORLD_SIZE to keep the sum,
    // and by 4 with --quad (a quarter of the images, each four samples' worth).
    const double gain = (world > 1 ? world : 1) * (s_.opt.quad ? 4.0 : 1.0);
    scaler_.scale(gain != 1 ? loss.loss * gain : loss.loss).backward();
    clock_.lap(&timing.backward);
    if (stepping) optimizer_step(ni, timing);
    running_loss_.add(loss.items);
    const bool read = (i + 1) % s_.loop.loss_read_interval == 0 || i + 1 >= nb_;
    if (read) running_loss_.read();  // the only read back from the device
    callbacks_.train_batch_end({epoch, s_.loop.epochs, i, nb_, ni, &imgs, &targets, &batch->paths,
                                &running_loss_.mean(), cuda_memory_reserved_gb(device), &timing});
    check_stop(epoch, i, read);
  }
  clock_.flush();
  // No epoch follows the last: the workers would prefetch one beside the final validation.
  if (!s_.batch_source && epoch + 1 >= s_.loop.epochs) s_.train_loader->stop();
  timing.images *= world;
  timing.seconds = epoch_clock.seconds();
  callbacks_.train_epoch_end(epoch, timing);
  return {running_loss_.epoch_mean(0), running_loss_.epoch_mean(1), running_loss_.epoch_mean(2)};
}

// --image-weights: sample images by the classes the model is worst at.
void Trainer::resample_images(int epoch) {
  if (!s_.loop.image_weights) return;
  const int nc = s_.nc;
  std::vector<double> cw = class_weights(s_.train_set->labels(), nc);
  for (int c = 0; c < nc; ++c) cw[c] *= std::pow(1 - maps_[c], 2) / nc;
  const std::vector<double> iw = image_weights(s_.train_set->labels(), nc, cw);
  Rng rng(static_cast<uint64_t>(s_.loop.seed) * 1000003 + epoch);
  s_.train_loader->stop();  // no worker may read the indices while they change
  s_.train_set->set_indices(weighted_indices(iw, s_.train_set->size(), rng));
}

// YOLOv5's warmup: accumulation, learning rates and momentum ramp up over the first nw batches.
void Trainer::warmup(int64_t ni, int epoch) {
  const Schedule& sc = s_.schedule;
  accumulate_ =
      std::max<int>(1, static_cast<int>(std::nearbyint(interp2(
                           ni, 0, nw_, 1, static_cast<double>(kNominalBatch) / sc.batch_size))));
  for (size_t g = 0; g < s_.optimizer->param_groups().size(); ++g) {
    const double target = sc.lr0 * group_lr_factor(g) * sc.lf(epoch);
    set_group_lr(*s_.optimizer, g,
                 interp2(ni, 0, nw_, group_kind(g) == 0 ? sc.warmup_bias_lr : 0.0, target));
    set_group_momentum(*s_.optimizer, g, interp2(ni, 0, nw_, sc.warmup_momentum, sc.momentum));
  }
}

// --multi-scale: a random size in [0.5, 1.5] x imgsz, a multiple of the stride, seeded per
// iteration so a resumed run draws the same sizes.
at::Tensor Trainer::multi_scale(const at::Tensor& imgs, int64_t ni) const {
  const int gs = s_.stride, imgsz = s_.imgsz;
  std::mt19937 ms_rng(static_cast<uint32_t>(s_.loop.seed * 7919 + ni));
  std::uniform_int_distribution<int> d(static_cast<int>(imgsz * 0.5),
                                       static_cast<int>(imgsz * 1.5) + gs - 1);
  const int sz = d(ms_rng) / gs * gs;
  const double sf = static_cast<double>(sz) / std::max(imgs.size(2), imgs.size(3));
  if (sf == 1) return imgs;
  const int64_t nh = static_cast<int64_t>(std::ceil(imgs.size(2) * sf / gs) * gs);
  const int64_t nw = static_cast<int64_t>(std::ceil(imgs.size(3) * sf / gs) * gs);
  return torch::nn::functional::interpolate(imgs, torch::nn::functional::InterpolateFuncOptions()
                                                      .size(std::vector<int64_t>{nh, nw})
                                                      .mode(torch::kBilinear)
                                                      .align_corners(false));
}

// Gradient all-reduce (DDP) or gather (DataParallel), unscale, clip, step, EMA: a handful of
// multi-tensor kernels, and no host read (AMP's inf/NaN skip is decided on the device).
void Trainer::optimizer_step(int64_t ni, EpochTiming& t) {
  if (s_.grad_sync) s_.grad_sync->finish();
  if (s_.dp) s_.dp->reduce_grads();
  clock_.lap(&t.sync);
  scaler_.unscale(params_);  // before clipping, as YOLOv5's scaler.unscale_
  clip_grad_norm(params_, 10.0);
  stepper_->step(scaler_.enabled() ? std::optional<at::Tensor>(scaler_.found_inf()) : std::nullopt);
  scaler_.update();
  stepper_->zero_grad();
  if (s_.ema) s_.ema->update(*s_.model);
  last_opt_step_ = ni;
  clock_.lap(&t.optimizer);
  ++t.optimizer_steps;
}

// A requested stop or a loss that stays non-finite ends the run at the same step on every rank.
// Ranks vote only on the steps that read the loss, which are the same steps on every rank. Under
// AMP the gradient scaler skips a step whose loss overflowed, as YOLOv5's does, and training goes
// on; without it the weights took the step, so the first non-finite loss ends the run.
void Trainer::check_stop(int epoch, int64_t i, bool read) {
  bool stop_now = stop_requested();
  const int64_t limit = scaler_.enabled() ? kNonFiniteStepsToStop : 1;
  bool nonfinite = read && running_loss_.nonfinite_run() >= limit;
  if (s_.dist.active()) {
    if (!read) return;
    at::Tensor flags = torch::tensor({stop_now ? 1.0 : 0.0, nonfinite ? 1.0 : 0.0},
                                     torch::TensorOptions(torch::kDouble).device(s_.dev.device));
    s_.dist.group()->allreduce_sum(flags);
    flags = flags.cpu();
    stop_now = flags[0].item<double>() > 0;
    nonfinite = flags[1].item<double>() > 0;
  }
  if (stop_now) {
    // Interrupted mid-epoch: keep the weights; a resume redoes this epoch. The other ranks wait
    // for rank 0's save, so torchrun does not stop it halfway.
    callbacks_.interrupt(epoch - 1, false);
    s_.dist.from_rank0("interrupted", "saved");
    throw TrainingInterrupted("training stopped at epoch " + std::to_string(epoch) + ", batch " +
                              std::to_string(i) + "; resume with --resume " +
                              shell_word(s_.paths.last));
  }
  if (nonfinite) {
    const int64_t run = running_loss_.nonfinite_run();
    throw std::runtime_error(
        "the training loss is not finite at epoch " + std::to_string(epoch) + ", batch " +
        std::to_string(i) + " (" +
        (run > 1 ? std::to_string(run) + " batches in a row; " : std::string()) +
        "check the data and learning rate)");
  }
}

// The epoch's learning rates (for results.csv), then the scheduler's step to the next epoch.
std::array<double, 3> Trainer::step_lr(int epoch) {
  std::array<double, 3> lrs{};
  for (size_t g = 0; g < 3; ++g) lrs[g] = group_lr(*s_.optimizer, g);
  const Schedule& sc = s_.schedule;
  for (size_t g = 0; g < s_.optimizer->param_groups().size(); ++g) {
    set_group_lr(*s_.optimizer, g, sc.lr0 * group_lr_factor(g) * sc.lf(epoch + 1));
  }
  return lrs;
}

// Rank 0's EMA on every rank, for validation.
void Trainer::share_ema() {
  if (!s_.dist.active()) return;
  std::vector<at::Tensor> state = s_.ema_model->parameters();
  for (const auto& b : s_.ema_model->buffers()) state.push_back(b);
  torch::NoGradGuard no_grad;
  broadcast_coalesced(*s_.dist.group(), state, 0);
}

// Validates the EMA, every rank its share of the batches; with --noval only the final epoch.
// Every rank gets rank 0's joined metrics, so all decide alike.
void Trainer::validate(EpochReport& r) {
  r.final_epoch = r.epoch + 1 == s_.loop.epochs || stopper_.possible_stop;
  if (s_.val_loader && (!s_.loop.noval || r.final_epoch)) {
    share_ema();
    ValConfig cfg;  // no plots: YOLOv5 plots the final validation only
    cfg.ranks = s_.dist.exchange();
    cfg.progress = s_.dist.is_rank0();
    cfg.half = s_.amp;  // as YOLOv5's validate.run(half=amp)
    cfg.names = s_.names;
    cfg.save_dir = s_.paths.save_dir;
    cfg.iou_thres = model_family(*s_.model).val_iou;
    cfg.protocol = model_family(*s_.model).val_protocol;
    const ValResult vr =
        run_validation(s_.ema_model, *s_.val_loader, cfg, s_.loss.get(), s_.dev.device);
    callbacks_.val_end(vr, false);
    results_ = {vr.mp, vr.mr, vr.map50, vr.map, vr.loss[0], vr.loss[1], vr.loss[2]};
    std::fill(maps_.begin(), maps_.end(), vr.map);
    for (size_t k = 0; k < vr.ap.classes.size(); ++k) maps_[vr.ap.classes[k]] = vr.ap.ap_mean(k);
  }
  r.metrics = results_;
}

void Trainer::decide_best(EpochReport& r) {
  r.fitness = fitness(results_[2], results_[3], model_family(*s_.model).fitness_map50);
  early_stop_ = stopper_(r.epoch, r.fitness);
  if (r.fitness > best_fitness_) best_fitness_ = r.fitness;
  r.is_best = r.fitness == best_fitness_;  // as YOLOv5: ties write best.pt too, 0 included
  r.stop_requested = stop_requested();
}

Trainer::Next Trainer::decide_next(int epoch, bool early_stop) {
  Next decision = Next::kContinue;
  if (stop_requested() && epoch + 1 < s_.loop.epochs) {
    callbacks_.interrupt(epoch, true);
    decision = Next::kInterrupt;
  } else if (early_stop) {
    decision = Next::kEarlyStop;
  }
  // Rank 0's decision, through the store as its number.
  const std::string agreed = s_.dist.from_rank0("epoch/" + std::to_string(epoch),
                                                std::to_string(static_cast<int>(decision)));
  return static_cast<Next>(std::stoi(agreed));
}

// Where the run's files are and the commands to try them with, as a new user needs them.
void Trainer::log_next_steps() const {
  const std::string& best = s_.paths.best;
  if (!fs::exists(best)) return;
  const std::string imgsz = std::to_string(s_.imgsz);
  const std::string files =
      s_.loop.noplots ? "results.csv is in " : "results.csv, results.png and the plots are in ";
  // Paths one line each, commands quoted for a POSIX shell: a run name may hold anything.
  std::string next = "Weights: " + one_line(best) + " (best fitness), " + one_line(s_.paths.last) +
                     " (last epoch); " + files + one_line(s_.paths.save_dir) + "\nNext: ";
  const std::string w = shell_word(best);
  if (!s_.opt.args_yaml.empty()) {  // started by the yolo program: its commands
    const std::string yolo = shell_word(sibling_program("yolo")) + " ";
    next += yolo + "val model=" + w + " imgsz=" + imgsz;
    if (!s_.data.val.empty()) {
      next += "\n      " + yolo + "predict model=" + w +
              " source=" + shell_word(s_.data.val.front()) + " imgsz=" + imgsz;
    }
    log_info(next + "\n      " + yolo + "export model=" + w + " format=onnx imgsz=" + imgsz);
    return;
  }
  next += shell_word(sibling_program("val")) + " --weights " + w + " --imgsz " + imgsz;
  if (!s_.data.val.empty()) {
    next += "\n      " + shell_word(sibling_program("detect")) + " --weights " + w + " --source " +
            shell_word(s_.data.val.front()) + " --imgsz " + imgsz;
  }
  next += "\n      " + shell_word(sibling_program("export")) + " --weights " + w +
          " --include torchscript onnx --imgsz " + imgsz;
  log_info(next);
}

// Validates best.pt (rank 0's, on every rank) with the per-class table (and the plots, unless
// --noplots).
void Trainer::final_validation(TrainSummary& summary) {
  const std::string& best = s_.paths.best;
  const bool have = s_.dist.from_rank0("final_validation", fs::exists(best) ? "1" : "0") == "1";
  if (!s_.val_loader || !have) return;
  log_info("\nValidating " + one_line(best) + "...");
  if (s_.dist.is_rank0()) load_state_dict(*s_.ema_model, load_checkpoint(best).model);
  share_ema();
  ValConfig cfg;
  cfg.ranks = s_.dist.exchange();
  cfg.progress = s_.dist.is_rank0();
  cfg.names = s_.names;
  cfg.save_dir = s_.paths.save_dir;
  cfg.verbose = true;
  cfg.plots = !s_.loop.noplots;
  // As YOLOv5 (save_json=is_coco): on COCO data best.pt is also scored with COCO's protocol.
  cfg.save_json = cfg.coco91 = is_coco_dataset(s_.data);
  cfg.json_name = "best_predictions.json";
  cfg.iou_thres = final_validation_iou(s_.data, model_family(*s_.model));
  cfg.protocol = model_family(*s_.model).val_protocol;
  ValResult vr = run_validation(s_.ema_model, *s_.val_loader, cfg, s_.loss.get(), s_.dev.device);
  callbacks_.val_end(vr, true);  // the table shows val's own metrics, then COCO's summary follows
  if (cfg.save_json && s_.dist.is_rank0()) {
    evaluate_coco_json((fs::path(cfg.save_dir) / cfg.json_name).string(), s_.data,
                       s_.val_loader->dataset().image_files(), vr);
  }
  summary.final_results = {vr.mp, vr.mr, vr.map50, vr.map, vr.loss[0], vr.loss[1], vr.loss[2]};
}

TrainSummary train(TrainConfig cfg, std::vector<std::unique_ptr<Callback>> callbacks) {
  return train(std::move(cfg), [&callbacks](const TrainSetup&) { return std::move(callbacks); });
}

TrainSummary train(TrainConfig cfg, const CallbackFactory& make_callbacks) {
  clear_stop_request();
  // The caller gets its thread count back, however the run ends.
  struct StopAdapting {
    ~StopAdapting() { stop_cpu_threads(); }
  } stop_adapting;
  Options in_force = cfg.opt();
  try {
    TrainSetup setup = set_up_training(std::move(cfg));
    in_force = setup.opt;
    if (setup.already_finished) {
      TrainSummary summary;
      summary.save_dir = setup.opt.save_dir;
      summary.epochs_run = setup.resume.start_epoch;
      summary.best_fitness = setup.resume.best_fitness;
      return summary;
    }
    const bool rank0 = setup.dist.is_rank0();
    Trainer trainer(std::move(setup));
    if (rank0) add_rank0_callbacks(trainer);
    for (auto& cb : make_callbacks(trainer.setup())) trainer.add_callback(std::move(cb));
    return trainer.fit();
  } catch (const c10::OutOfMemoryError& e) {
    // Checkpoints are written whole or not at all, so the last good last.pt stays as it was.
    throw std::runtime_error(out_of_memory_message(
        in_force, read_dist_env(in_force.local_rank).world_size, e.what_without_backtrace()));
  }
}

}  // namespace yolo

#include "apps/train/trainer.h"

#include <torch/torch.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "apps/train/ddp_setup.h"
#include "apps/val/validator.h"
#include "data/dataset.h"
#include "data/dataset_config.h"
#include "data/loader.h"
#include "models/data_parallel.h"
#include "models/sync_batchnorm.h"
#include "models/weights.h"
#include "models/yolo.h"
#include "utils/autoanchor.h"
#include "utils/checkpoint.h"
#include "utils/cuda_env.h"
#include "utils/device.h"
#include "utils/distributed.h"
#include "utils/ema.h"
#include "utils/errors.h"
#include "utils/grad_scaler.h"
#include "utils/grad_sync.h"
#include "utils/log.h"
#include "utils/loss.h"
#include "utils/optim.h"
#include "utils/paths.h"
#include "utils/plots.h"
#include "utils/yaml_io.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int kNominalBatch = 64;  // YOLOv5's nbs

// YOLOv5's EarlyStopping: stop after `patience` epochs without a fitness improvement.
class EarlyStopping {
 public:
  explicit EarlyStopping(int patience) : patience_(patience > 0 ? patience : 1 << 30) {}
  bool operator()(int epoch, double fitness) {
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
  bool possible_stop = false;

 private:
  int patience_;
  int best_epoch_ = 0;
  double best_fitness_ = 0.0;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

const char* kResultKeys[] = {"train/box_loss",
                             "train/obj_loss",
                             "train/cls_loss",
                             "metrics/precision",
                             "metrics/recall",
                             "metrics/mAP_0.5",
                             "metrics/mAP_0.5:0.95",
                             "val/box_loss",
                             "val/obj_loss",
                             "val/cls_loss",
                             "x/lr0",
                             "x/lr1",
                             "x/lr2"};

void append_results_csv(const std::string& path, int epoch, const std::vector<double>& vals) {
  const bool exists = fs::exists(path);
  std::ofstream f(path, std::ios::app);
  if (!f) throw std::runtime_error(path + ": cannot write results");
  char buf[64];
  if (!exists) {
    std::string head;
    std::snprintf(buf, sizeof(buf), "%20s,", "epoch");
    head += buf;
    for (const char* k : kResultKeys) {
      std::snprintf(buf, sizeof(buf), "%20s,", k);
      head += buf;
    }
    head.pop_back();
    f << head << "\n";
  }
  std::string line;
  std::snprintf(buf, sizeof(buf), "%20.5g,", static_cast<double>(epoch));
  line += buf;
  for (double v : vals) {
    std::snprintf(buf, sizeof(buf), "%20.5g,", v);
    line += buf;
  }
  line.pop_back();
  f << line << "\n";
  if (!f.flush()) throw std::runtime_error(path + ": write failed (disk full?)");
}

std::string progress_line(int epoch, int epochs, double gpu_mem_gb, const at::Tensor& mloss,
                          int64_t instances, int64_t size) {
  char buf[256], mem[32];
  std::snprintf(mem, sizeof(mem), "%.3gG", gpu_mem_gb);  // YOLOv5: f'{reserved / 1E9:.3g}G'
  std::snprintf(buf, sizeof(buf), "%11s%11s%11.4g%11.4g%11.4g%11lld%11lld",
                (std::to_string(epoch) + "/" + std::to_string(epochs - 1)).c_str(), mem,
                mloss[0].item<double>(), mloss[1].item<double>(), mloss[2].item<double>(),
                static_cast<long long>(instances), static_cast<long long>(size));
  return buf;
}

std::atomic<bool> g_stop{false};

// --resume: the run's own options (opt.yaml beside weights/), with only the flags that may differ
// between machines taken from this command line. `strict` = false accepts the other flags too
// (a restart by torchrun repeats the run's own command line).
Options resume_options(const Options& cli, bool strict = true) {
  const std::string ckpt = cli.resume_path.empty() ? latest_run() : cli.resume_path;
  std::error_code ec;
  if (!fs::is_regular_file(ckpt, ec)) {
    throw UsageError("--resume: checkpoint '" + ckpt + "' not found");
  }
  const fs::path run_dir = fs::absolute(ckpt).parent_path().parent_path();
  const fs::path opt_yaml = run_dir / "opt.yaml";
  if (!fs::is_regular_file(opt_yaml, ec)) {
    throw UsageError("--resume: " + opt_yaml.string() + " not found; " + ckpt +
                     " must sit in a run dir's weights/ folder");
  }
  static const std::set<std::string> kMayChange = {"resume",        "device",       "workers",
                                                   "local_rank",    "dist-backend", "dist-timeout",
                                                   "nproc-per-node"};
  for (const auto& flag : cli.given) {
    if (strict && !kMayChange.count(flag)) {
      throw UsageError("--" + flag +
                       " cannot be changed when resuming (the run continues with "
                       "the options in " +
                       opt_yaml.string() +
                       "); only --device, --workers and "
                       "the distributed flags may be given");
    }
  }
  Options o = load_options(opt_yaml.string());
  o.resume = true;
  o.resume_path = ckpt;
  o.save_dir = run_dir.string();
  o.given = cli.given;
  for (const auto& flag : cli.given) {
    if (flag == "device") o.device = cli.device;
    if (flag == "workers") o.workers = cli.workers;
    if (flag == "local_rank") o.local_rank = cli.local_rank;
    if (flag == "dist-backend") o.dist_backend = cli.dist_backend;
    if (flag == "dist-timeout") o.dist_timeout = cli.dist_timeout;
  }
  const fs::path hyp_copy = run_dir / "hyp.yaml";
  if (fs::is_regular_file(hyp_copy, ec)) o.hyp = hyp_copy.string();  // the run's own copy
  return o;
}

}  // namespace

void request_stop() { g_stop.store(true); }

std::string latest_run(const std::string& search_dir) {
  std::error_code ec;
  fs::path best;
  fs::file_time_type best_time{};
  if (fs::is_directory(search_dir, ec)) {
    for (auto it = fs::recursive_directory_iterator(search_dir, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      const std::string name = it->path().filename().string();
      if (it->is_regular_file(ec) && name.rfind("last", 0) == 0 &&
          it->path().extension() == ".pt") {
        const auto t = fs::last_write_time(it->path(), ec);
        if (best.empty() || t > best_time) {
          best = it->path();
          best_time = t;
        }
      }
    }
  }
  if (best.empty()) {
    throw UsageError("--resume: no last.pt found under " + search_dir +
                     "/; pass the checkpoint: --resume path/to/last.pt");
  }
  return best.string();
}

std::string out_of_memory_message(const Options& opt, int world_size, const std::string& what) {
  const int per_gpu = opt.batch_size / std::max(world_size, 1);
  return "CUDA out of memory training with --batch-size " + std::to_string(opt.batch_size) + " (" +
         std::to_string(per_gpu) + " images per GPU) at --imgsz " + std::to_string(opt.imgsz) +
         ": lower --batch-size (e.g. --batch-size " +
         std::to_string(std::max(opt.batch_size / 2, 1)) +
         ") or --imgsz, or use a smaller --cfg; weights/last.pt, if any, is unchanged (" +
         what.substr(0, what.find('\n')) + ")";
}

namespace {
// train()'s body; `opt` becomes the options in force (a --resume's own), for the error message.
TrainSummary run_training(Options& opt, const TrainHooks& hooks) {
  g_stop.store(false);
  if (opt.resume) opt = resume_options(opt);
  resolve_option_files(opt);
  DeviceSelection dev;
  const DistContext dist = start_distributed(opt, dev);
  const bool rank0 = dist.is_rank0();
  const int world = dist.world_size();
  if (!opt.resume) {
    // torchrun restarted the workers (--max_restarts): continue the run from its last.pt.
    const std::string ckpt = dist.restart_checkpoint();
    if (!ckpt.empty()) {
      log_info("torchrun restart " + std::to_string(dist.env().restart_count) + ": resuming " +
               ckpt);
      Options cli = opt;
      cli.resume = true;
      cli.resume_path = ckpt;
      opt = resume_options(cli, false);
      resolve_option_files(opt);
    }
  }
  const torch::Device device = dev.device;
  log_info("YOLOv5 C++ trainer, torch " + std::string(TORCH_VERSION) + " " + dev.description);
  if (opt.sync_bn && !dist.active()) {
    log_warn("--sync-bn is only used in DDP mode; ignored for this single process");
  }
  // YOLOv5's init_seeds(seed + 1 + RANK); DDP then copies rank 0's weights to every rank.
  torch::manual_seed(opt.seed + 1 + std::max(dist.rank(), 0));
  configure_cudnn(opt.deterministic);

  // Hyperparameters and run dir.
  Hyp hyp = load_hyp(opt.hyp);
  {
    std::string s = "hyperparameters: ";
    bool first = true;
    for (const auto& k : required_hyp_keys()) {
      s += (first ? "" : ", ") + k + "=" + fmt("%g", hyp.at(k));
      first = false;
    }
    log_info(s);
  }
  Checkpoint resume_ckpt;
  if (opt.resume) {
    resume_ckpt = load_checkpoint(opt.resume_path);
  } else if (rank0) {
    opt.save_dir = increment_path((fs::path(opt.project) / opt.name).string(), opt.exist_ok, true);
  }
  opt.save_dir = dist.from_rank0("save_dir", opt.save_dir);  // only rank 0 writes there
  dist.remember_run_dir(opt.save_dir);
  const fs::path save_dir(opt.save_dir), wdir = save_dir / "weights";
  if (rank0) fs::create_directories(wdir);
  const std::string last = (wdir / "last.pt").string(), best = (wdir / "best.pt").string();
  TrainSummary summary;
  summary.save_dir = opt.save_dir;
  if (opt.resume) {
    if (resume_ckpt.epoch + 1 >= opt.epochs) {
      log_info(opt.resume_path + " training to " + std::to_string(opt.epochs) +
               " epochs is finished, nothing to resume.");
      summary.epochs_run = static_cast<int>(resume_ckpt.epoch) + 1;
      summary.best_fitness = resume_ckpt.best_fitness;
      return summary;
    }
    if (!resume_ckpt.has_optimizer() || resume_ckpt.train_model.empty()) {
      throw std::runtime_error(opt.resume_path +
                               ": has no optimizer state (a stripped best.pt or final last.pt) "
                               "and cannot be resumed; resume from an interrupted run's last.pt");
    }
  } else if (rank0) {
    save_yaml_file(hyp_to_yaml(hyp), (save_dir / "hyp.yaml").string());
    save_options(opt, (save_dir / "opt.yaml").string());
  }
  const std::string opt_text = yaml_dump(options_to_yaml(opt)),
                    hyp_text = yaml_dump(hyp_to_yaml(hyp));

  // Data config.
  DatasetConfig data = load_dataset_config(opt.data);
  ensure_dataset(data, rank0, dist.rank0_first("dataset"));
  std::vector<std::string> names = data.names;
  int nc = data.nc;
  if (opt.single_cls) {
    nc = 1;
    names = {"item"};
  }

  // Model.
  DetectionModel model = build_model(opt.cfg, nc);
  if (opt.resume) {
    const LoadReport r = load_state_dict(*model, resume_ckpt.train_model);
    if (r.transferred != r.total) {
      throw std::runtime_error(opt.resume_path + ": the checkpoint does not match the model " +
                               opt.cfg + " (" + std::to_string(r.transferred) + "/" +
                               std::to_string(r.total) + " entries)");
    }
  } else if (!opt.weights.empty()) {
    load_weights(*model, opt.weights);
  }
  model->to(device);
  log_info(model->summary());
  // Freeze: --freeze 10 freezes layers 0..9, --freeze 0 1 2 those layers.
  std::vector<int> freeze_layers;
  if (opt.freeze.size() > 1) {
    freeze_layers = opt.freeze;
  } else if (!opt.freeze.empty()) {
    for (int i = 0; i < opt.freeze[0]; ++i) freeze_layers.push_back(i);
  }
  for (auto& kv : model->named_parameters()) {
    for (int l : freeze_layers) {
      if (kv.key().rfind("model." + std::to_string(l) + ".", 0) == 0) {
        kv.value().set_requires_grad(false);
        break;
      }
    }
  }
  const int gs = model->max_stride();
  const int imgsz = check_img_size(opt.imgsz, gs);
  const int batch_size = opt.batch_size;  // total over the ranks: accumulation and decay use it
  const int rank_batch = batch_size / world;

  // Optimizer: nominal batch 64, weight decay scaled accordingly.
  const int accumulate_target = std::max(
      static_cast<int>(std::nearbyint(static_cast<double>(kNominalBatch) / batch_size)), 1);
  hyp.set("weight_decay", hyp.at("weight_decay") * batch_size * accumulate_target / kNominalBatch);
  const ParamGroups groups = split_param_groups(*model);
  auto optimizer = make_optimizer(opt.optimizer, groups, hyp.at("lr0"), hyp.at("momentum"),
                                  hyp.at("weight_decay"));
  log_info("optimizer: " + opt.optimizer + "(lr=" + fmt("%g", hyp.at("lr0")) +
           ") with parameter groups " + std::to_string(groups.bn.size()) + " weight(decay=0.0), " +
           std::to_string(groups.weight.size()) +
           " weight(decay=" + fmt("%g", hyp.at("weight_decay")) + "), " +
           std::to_string(groups.bias.size()) + " bias");
  const auto lf = lr_lambda(opt.cos_lr, opt.epochs, hyp.at("lrf"));
  const double initial_lr = hyp.at("lr0");
  for (size_t g = 0; g < 3; ++g) set_group_lr(*optimizer, g, initial_lr * lf(0));

  // Datasets and loaders.
  AugmentHyp aug = AugmentHyp::from_yaml(load_yaml_file(opt.hyp), opt.hyp);
  DatasetOptions tr;
  tr.imgsz = imgsz;
  tr.batch_size = rank_batch;
  tr.augment = true;
  tr.rect = opt.rect;
  tr.single_cls = opt.single_cls;
  tr.stride = gs;
  tr.pad = 0.0;
  tr.cache = opt.cache;
  tr.hyp = aug;
  tr.nc = nc;
  tr.is_rank0 = rank0;
  tr.barrier = dist.rank0_first("train_labels");
  auto train_set = std::make_shared<YoloDataset>(data.train, tr);
  LoaderOptions tl;
  tl.batch_size = rank_batch;
  tl.world_size = world;
  tl.rank = std::max(dist.rank(), 0);
  tl.workers = opt.workers;
  tl.shuffle = !opt.rect;
  tl.seed = static_cast<uint64_t>(opt.seed);
  DataLoader train_loader(train_set, tl);
  // Validation runs on rank 0 only.
  std::unique_ptr<DataLoader> val_loader;
  if (rank0) {
    DatasetOptions va = tr;
    va.augment = false;
    va.rect = true;
    va.pad = 0.5;
    va.batch_size = rank_batch * 2;
    va.hyp = AugmentHyp::none();
    va.is_rank0 = true;
    va.barrier = {};
    auto val_set = std::make_shared<YoloDataset>(data.val, va);
    LoaderOptions vl = tl;
    vl.batch_size = rank_batch * 2;
    vl.shuffle = false;
    vl.world_size = 1;
    vl.rank = 0;
    val_loader = std::make_unique<DataLoader>(val_set, vl);
  }

  const bool plots = !opt.noplots && rank0;
  if (plots) {
    std::vector<std::array<float, 5>> all;
    for (const auto& ls : train_set->labels()) {
      for (const auto& l : ls) all.push_back({l.cls, l.cx, l.cy, l.w, l.h});
    }
    plot_labels(all, names, (save_dir / "labels.jpg").string());
  }
  if (!opt.noautoanchor && !opt.resume && rank0) {  // a resumed model keeps its anchors
    std::vector<std::array<float, 2>> image_wh;
    std::vector<std::vector<std::array<float, 2>>> labels_wh;
    for (size_t i = 0; i < train_set->size(); ++i) {
      const cv::Size sz = train_set->image_sizes()[i];
      image_wh.push_back({static_cast<float>(sz.width), static_cast<float>(sz.height)});
      std::vector<std::array<float, 2>> wh;
      for (const auto& l : train_set->labels()[i]) wh.push_back({l.w, l.h});
      labels_wh.push_back(std::move(wh));
    }
    auto det = model->detect();
    const at::Tensor stride = det->stride.to(device).view({-1, 1, 1});
    const AutoAnchorResult aa =
        check_anchors(image_wh, labels_wh, (det->anchors * stride).cpu(), model->strides(),
                      hyp.at("anchor_t"), imgsz, static_cast<uint64_t>(opt.seed));
    log_info(aa.message);
    if (aa.replaced) {
      torch::NoGradGuard no_grad;
      det->anchors.copy_(aa.anchors_px.to(det->anchors.device()) / stride);
    }
  }

  // EMA on rank 0: a second instance of the same model (after AutoAnchor, so it starts with the
  // anchors).
  DetectionModel ema_model{nullptr};
  std::unique_ptr<ModelEMA> ema;
  if (rank0) {
    ema_model = DetectionModel(model->spec());
    ema_model->to(device);
    ema = std::make_unique<ModelEMA>(ema_model.ptr(), *model);
  }
  int start_epoch = 0;
  int64_t last_opt_step = -1;
  double best_fitness = 0.0;
  if (opt.resume) {
    if (rank0) {
      load_state_dict(*ema_model, resume_ckpt.model);
      ema->set_updates(resume_ckpt.ema_updates);
    }
    load_optimizer_state(*optimizer, opt.optimizer, resume_ckpt.optimizer);
    start_epoch = static_cast<int>(resume_ckpt.epoch) + 1;
    best_fitness = resume_ckpt.best_fitness;
    last_opt_step = resume_ckpt.last_opt_step;
    log_info("Resuming training from " + opt.resume_path + " from epoch " +
             std::to_string(start_epoch) + " to " + std::to_string(opt.epochs) + " total epochs");
  }

  // DDP: SyncBatchNorm (same tensors, so the optimizer keeps them), rank 0's weights and buffers
  // (anchors included) on every rank, and gradient all-reduce hooks.
  std::unique_ptr<GradSync> grad_sync;
  std::vector<at::Tensor> ddp_buffers;  // broadcast before each forward without SyncBN
  if (dist.active()) {
    if (opt.sync_bn) {
      const int n = convert_sync_batchnorm(*model, dist.group());
      log_info("Using SyncBatchNorm() for " + std::to_string(n) + " layers");
    }
    std::vector<at::Tensor> state = model->parameters();
    for (const auto& b : model->buffers()) state.push_back(b);
    broadcast_coalesced(*dist.group(), state, 0);
    if (!opt.sync_bn) ddp_buffers = model->buffers();
    std::vector<at::Tensor> trainable;
    for (const auto& p : model->parameters()) {
      if (p.requires_grad()) trainable.push_back(p);
    }
    grad_sync = std::make_unique<GradSync>(dist.group(), trainable);
  }

  // Several GPUs without torchrun: DataParallel in this process, as YOLOv5 does.
  std::unique_ptr<DataParallel> dp;
  if (!dist.active() && dev.cuda_ids.size() > 1) {
    log_warn(
        "DP not recommended, use torchrun (or --nproc-per-node) for best DDP Multi-GPU "
        "results; see the README's multi-process section");
    std::vector<torch::Device> devices;
    for (int id : dev.cuda_ids) {
      devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(id));
    }
    dp = std::make_unique<DataParallel>(model, devices);
  }

  // Mixed precision on CUDA, as YOLOv5 (its check_amp passes on any CUDA device we support).
  const bool amp = device.is_cuda();
  GradScaler scaler(amp);
  if (amp) log_info("AMP: mixed precision (autocast + gradient scaling) on " + dev.description);

  // Loss.
  const int nl = model->detect()->nl;
  const LossGains gains = scale_loss_gains(hyp, nl, nc, imgsz, opt.label_smoothing);
  ComputeLoss compute_loss(gains, nc, model->detect()->anchors);

  const int64_t nb = static_cast<int64_t>(train_loader.num_batches());
  const int64_t nw = std::max<int64_t>(std::llround(hyp.at("warmup_epochs") * nb), 100);
  EarlyStopping stopper(opt.patience);
  std::vector<double> results(7, 0.0);
  std::vector<double> maps(nc, 0.0);  // per-class mAP50-95 of the last validation
  const bool tty = ::isatty(STDOUT_FILENO);
  const std::vector<torch::Tensor> params = model->parameters();
  ValConfig vcfg;  // per-epoch validation (rank 0): no plots (YOLOv5 plots the final one)
  vcfg.names = names;
  vcfg.save_dir = opt.save_dir;

  log_info("Image sizes " + std::to_string(imgsz) + " train, " + std::to_string(imgsz) +
           " val\nUsing " + std::to_string(train_loader.workers()) +
           " dataloader workers\nLogging results to " + opt.save_dir + "\nStarting training for " +
           std::to_string(opt.epochs) + " epochs...");
  const auto t_train = Clock::now();
  // A checkpoint of the current state; `done_epoch` is the last fully trained epoch.
  auto make_checkpoint = [&](int done_epoch) {
    Checkpoint ck;
    ck.epoch = done_epoch;
    ck.best_fitness = best_fitness;
    ck.model = state_dict(*ema_model);
    ck.train_model = state_dict(*model);
    ck.last_opt_step = last_opt_step;
    ck.optimizer = optimizer_state(*optimizer, opt.optimizer);
    ck.ema_updates = ema->updates();
    ck.opt = opt_text;
    ck.hyp = hyp_text;
    return ck;
  };
  int epoch = start_epoch;
  for (; epoch < opt.epochs; ++epoch) {
    model->train();
    if (opt.image_weights) {  // sample images by the classes the model is worst at
      std::vector<double> cw = class_weights(train_set->labels(), nc);
      for (int c = 0; c < nc; ++c) cw[c] *= std::pow(1 - maps[c], 2) / nc;
      const std::vector<double> iw = image_weights(train_set->labels(), nc, cw);
      Rng rng(static_cast<uint64_t>(opt.seed) * 1000003 + epoch);
      train_set->set_indices(weighted_indices(iw, train_set->size(), rng));
    }
    train_loader.start_epoch(epoch);
    at::Tensor mloss = torch::zeros({3});
    optimizer->zero_grad();
    char head[128];
    std::snprintf(head, sizeof(head), "\n%11s%11s%11s%11s%11s%11s%11s", "Epoch", "GPU_mem",
                  "box_loss", "obj_loss", "cls_loss", "Instances", "Size");
    log_info(head);
    double t_data = 0, t_fwd = 0, t_bwd = 0, t_opt = 0, t_sync = 0;
    int64_t images = 0;
    int accumulate = accumulate_target;
    std::string line;
    const auto t_epoch = Clock::now();
    for (int64_t i = 0;; ++i) {
      auto t0 = Clock::now();
      std::optional<Batch> batch = train_loader.next();
      t_data += seconds_since(t0);
      if (!batch) break;
      const int64_t ni = i + nb * epoch;
      at::Tensor imgs = batch->images.to(device, true);
      const at::Tensor targets = batch->targets.to(device);
      images += imgs.size(0);
      if (ni <= nw) {  // warmup
        accumulate =
            std::max<int>(1, static_cast<int>(std::nearbyint(interp2(
                                 ni, 0, nw, 1, static_cast<double>(kNominalBatch) / batch_size))));
        for (size_t g = 0; g < 3; ++g) {
          set_group_lr(
              *optimizer, g,
              interp2(ni, 0, nw, g == 0 ? hyp.at("warmup_bias_lr") : 0.0, initial_lr * lf(epoch)));
          set_group_momentum(*optimizer, g,
                             interp2(ni, 0, nw, hyp.at("warmup_momentum"), hyp.at("momentum")));
        }
      }
      if (opt.multi_scale) {
        // Seeded per iteration, so a resumed run draws the same sizes.
        std::mt19937 ms_rng(static_cast<uint32_t>(opt.seed * 7919 + ni));
        std::uniform_int_distribution<int> d(static_cast<int>(imgsz * 0.5),
                                             static_cast<int>(imgsz * 1.5) + gs - 1);
        const int sz = d(ms_rng) / gs * gs;
        const double sf = static_cast<double>(sz) / std::max(imgs.size(2), imgs.size(3));
        if (sf != 1) {
          const int64_t nh = static_cast<int64_t>(std::ceil(imgs.size(2) * sf / gs) * gs);
          const int64_t nwd = static_cast<int64_t>(std::ceil(imgs.size(3) * sf / gs) * gs);
          imgs = torch::nn::functional::interpolate(imgs,
                                                    torch::nn::functional::InterpolateFuncOptions()
                                                        .size(std::vector<int64_t>{nh, nwd})
                                                        .mode(torch::kBilinear)
                                                        .align_corners(false));
        }
      }
      auto t1 = Clock::now();
      if (plots && ni < 3) {
        plot_images(imgs, targets, batch->paths, names,
                    (save_dir / ("train_batch" + std::to_string(ni) + ".jpg")).string());
      }
      const bool stepping = ni - last_opt_step >= accumulate;
      if (grad_sync) grad_sync->set_sync(stepping);  // DDP's no_sync on accumulating batches
      if (!ddp_buffers.empty()) broadcast_coalesced(*dist.group(), ddp_buffers, 0);
      LossResult lr;
      {
        AutocastScope autocast(amp);
        lr = compute_loss(dp ? dp->forward(imgs) : model->forward_raw(imgs), targets);
      }
      t_fwd += seconds_since(t1);
      auto t2 = Clock::now();
      // DDP averages gradients over ranks; YOLOv5 scales the loss by WORLD_SIZE to keep the sum.
      scaler.scale(world > 1 ? lr.loss * world : lr.loss).backward();
      t_bwd += seconds_since(t2);
      if (stepping) {
        auto t3 = Clock::now();
        if (grad_sync) grad_sync->finish();
        if (dp) dp->reduce_grads();
        t_sync += seconds_since(t3);
        scaler.unscale(params);  // before clipping, as YOLOv5's scaler.unscale_
        torch::nn::utils::clip_grad_norm_(params, 10.0);
        if (scaler.should_step()) optimizer->step();  // skipped on inf/NaN gradients (AMP)
        scaler.update();
        optimizer->zero_grad();
        if (ema) ema->update(*model);
        last_opt_step = ni;
        t_opt += seconds_since(t3);
      }
      mloss = (mloss * i + lr.items.cpu()) / (i + 1);
      line = progress_line(epoch, opt.epochs, cuda_memory_reserved_gb(device), mloss,
                           targets.size(0), imgs.size(3));
      if (tty && log_enabled()) {
        std::printf("\r%s %lld/%lld", line.c_str(), static_cast<long long>(i + 1),
                    static_cast<long long>(nb));
        std::fflush(stdout);
      }
      bool stop_now = g_stop.load(), nonfinite = !std::isfinite(lr.items.sum().item<double>());
      if (dist.active()) {  // every rank stops at the same step
        at::Tensor flags = torch::tensor({stop_now ? 1.0 : 0.0, nonfinite ? 1.0 : 0.0},
                                         torch::TensorOptions(torch::kDouble).device(device));
        dist.group()->allreduce_sum(flags);
        stop_now = flags[0].item<double>() > 0;
        nonfinite = flags[1].item<double>() > 0;
      }
      if (stop_now) {
        // Interrupted mid-epoch: keep the weights; a resume redoes this epoch. The other ranks
        // wait for rank 0's save, so torchrun does not stop it halfway.
        if (rank0) save_checkpoint(make_checkpoint(epoch - 1), last);
        dist.from_rank0("interrupted", "saved");
        throw TrainingInterrupted("training stopped at epoch " + std::to_string(epoch) +
                                  ", batch " + std::to_string(i) + "; resume with --resume " +
                                  last);
      }
      if (nonfinite) {
        throw std::runtime_error("the training loss is not finite at epoch " +
                                 std::to_string(epoch) + ", batch " + std::to_string(i) +
                                 " (check the data and learning rate)");
      }
    }
    if (tty && log_enabled()) std::printf("\r");
    log_info(line);
    const double t_ep = seconds_since(t_epoch);
    log_info("  " + std::to_string(images * world) + " images in " + fmt("%.1f", t_ep) + " s (" +
             fmt("%.1f", images * world / std::max(t_ep, 1e-9)) + " img/s): data " +
             fmt("%.1f", t_data) + " s, forward+loss " + fmt("%.1f", t_fwd) + " s, backward " +
             fmt("%.1f", t_bwd) + " s, optimizer+EMA " + fmt("%.1f", t_opt - t_sync) + " s" +
             (dist.active() ? ", all-reduce wait " + fmt("%.2f", t_sync) + " s (rank 0)" : ""));

    std::vector<double> lrs;
    for (size_t g = 0; g < 3; ++g) lrs.push_back(group_lr(*optimizer, g));
    for (size_t g = 0; g < 3; ++g) set_group_lr(*optimizer, g, initial_lr * lf(epoch + 1));

    // Validation, results and checkpoints on rank 0; the others wait for its decision.
    bool early_stop = false;
    if (rank0) {
      const bool final_epoch = epoch + 1 == opt.epochs || stopper.possible_stop;
      if (!opt.noval || final_epoch) {
        const ValResult vr = run_validation(ema_model, *val_loader, vcfg, &compute_loss, device);
        log_info(format_val_table(vr, names, false));
        results = {vr.mp, vr.mr, vr.map50, vr.map, vr.loss[0], vr.loss[1], vr.loss[2]};
        std::fill(maps.begin(), maps.end(), vr.map);
        for (size_t k = 0; k < vr.ap.classes.size(); ++k) {
          maps[vr.ap.classes[k]] = vr.ap.ap_mean(k);
        }
      }
      const double fi = fitness(results[2], results[3]);
      early_stop = stopper(epoch, fi);
      const bool is_best = fi > best_fitness;
      if (is_best) best_fitness = fi;
      std::vector<double> row{mloss[0].item<double>(), mloss[1].item<double>(),
                              mloss[2].item<double>()};
      row.insert(row.end(), results.begin(), results.end());
      row.insert(row.end(), lrs.begin(), lrs.end());
      append_results_csv((save_dir / "results.csv").string(), epoch, row);
      if (!opt.nosave || final_epoch || g_stop.load()) {
        const Checkpoint ck = make_checkpoint(epoch);
        save_checkpoint(ck, last);
        if (is_best) save_checkpoint(ck, best);
        if (opt.save_period > 0 && epoch % opt.save_period == 0) {
          save_checkpoint(ck, (wdir / ("epoch" + std::to_string(epoch) + ".pt")).string());
        }
      }
    }
    summary.epochs_run = epoch + 1;
    std::copy(results.begin(), results.end(), summary.last_results.begin());
    if (hooks.on_epoch_end) hooks.on_epoch_end(epoch);
    std::string decision = "continue";
    if (rank0 && g_stop.load() && epoch + 1 < opt.epochs) {
      if (opt.nosave) save_checkpoint(make_checkpoint(epoch), last);
      decision = "interrupt";
    } else if (early_stop) {
      decision = "stop";
    }
    decision = dist.from_rank0("epoch/" + std::to_string(epoch), decision);
    if (decision == "interrupt") {
      throw TrainingInterrupted("training stopped after epoch " + std::to_string(epoch) +
                                "; resume with --resume " + last);
    }
    if (decision == "stop") break;
  }
  log_info("\n" + std::to_string(summary.epochs_run) + " epochs completed in " +
           fmt("%.3f", seconds_since(t_train) / 3600) + " hours.");
  if (rank0) {
    // YOLOv5 strips the optimizer from the final weights unless periodic checkpoints were asked
    // for.
    for (const std::string& f : {last, best}) {
      if (fs::exists(f) && opt.save_period < 1) strip_optimizer(f);
    }
    // Final validation of best.pt with the per-class table.
    if (fs::exists(best)) {
      log_info("\nValidating " + best + "...");
      load_state_dict(*ema_model, load_checkpoint(best).model);
      ValConfig fcfg = vcfg;
      fcfg.verbose = true;
      fcfg.plots = plots;
      const ValResult vr = run_validation(ema_model, *val_loader, fcfg, &compute_loss, device);
      log_info(format_val_table(vr, names, true));
      summary.final_results = {vr.mp, vr.mr, vr.map50, vr.map, vr.loss[0], vr.loss[1], vr.loss[2]};
    }
    if (plots) {
      plot_results((save_dir / "results.csv").string(), (save_dir / "results.png").string());
    }
  }
  dist.from_rank0("finished", "done");
  summary.best_fitness = best_fitness;
  log_info("Results saved to " + opt.save_dir);
  return summary;
}
}  // namespace

TrainSummary train(Options opt, const TrainHooks& hooks) {
  try {
    return run_training(opt, hooks);
  } catch (const c10::OutOfMemoryError& e) {
    // Checkpoints are written whole or not at all, so the last good last.pt stays as it was.
    throw std::runtime_error(out_of_memory_message(opt, read_dist_env(opt.local_rank).world_size,
                                                   e.what_without_backtrace()));
  }
}

}  // namespace yolo

#include "utils/engine/train_setup.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "data/dataset.h"
#include "data/file_lists.h"
#include "models/weights.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/yaml_io.h"
#include "utils/distributed/data_parallel.h"
#include "utils/distributed/distributed.h"
#include "utils/distributed/grad_sync.h"
#include "utils/distributed/sync_batchnorm.h"
#include "utils/engine/autoanchor.h"
#include "utils/engine/autobatch.h"
#include "utils/engine/ema.h"
#include "utils/engine/optim.h"
#include "utils/eval/loss.h"
#include "utils/eval/model_family.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {

// How messages name a --hyp-set word: with the flag for train's command line, as the key=value the
// user typed for a run the yolo program started (it passes those words on as --hyp-set).
std::string hyp_set_flag(const Options& opt) { return opt.args_yaml.empty() ? "--hyp-set" : ""; }

// --augment-device cuda: training batches are rendered on the GPU. Given with a CPU device it is
// refused (train_rules.cpp); from a resumed run's opt.yaml it falls back to the CPU with a warning.
bool augment_on_device(const TrainSetup& s) {
  if (s.opt.augment_device != "cuda") return false;
  if (s.dev.device.is_cuda()) return true;
  log_warn(
      "--augment-device cuda (from the run's opt.yaml) needs a CUDA device; training runs on " +
      s.dev.device.str() + ", so augmentation runs on the CPU");
  return false;
}

// The options in force, the device chosen and the process group up. After a torchrun restart
// (--max_restarts) the run continues from its last.pt: the one place a configuration is resolved
// again.
void start_run(TrainSetup& s, TrainConfig cfg) {
  const Options& o = cfg.opt();
  s.dist = start_distributed({o.device, o.local_rank, o.batch_size, o.dist_backend, o.dist_timeout},
                             s.dev);
  if (!o.resume) {
    const std::string ckpt = s.dist.restart_checkpoint();
    if (!ckpt.empty()) {
      log_info("torchrun restart " + std::to_string(s.dist.env().restart_count) + ": resuming " +
               ckpt);
      cfg = resolve_restart(cfg.command_line(), ckpt);
    }
  }
  s.opt = cfg.opt();
  s.weights = cfg.weights();
  s.model_yaml = cfg.model_yaml();
  s.loop = {s.opt.epochs,  s.opt.patience,    s.opt.seed,          s.opt.noval,
            s.opt.noplots, s.opt.multi_scale, s.opt.image_weights, s.opt.optimizer};
  s.loop.loss_read_interval = s.dev.device.is_cpu() ? 1 : kGpuLossReadInterval;
  s.augment_on_device = augment_on_device(s);
  log_info("YOLOv5 C++ trainer, torch " + std::string(TORCH_VERSION) + " " + s.dev.description);
  if (s.weights && s.weights->yolov5 && !s.model_yaml.empty()) {
    log_info("model: the architecture of " + s.opt.weights + " (" + s.weights->yolov5->model_class +
             ")");
  }
  s.threads = plan_threads(s.dev.device.is_cuda(), s.opt.workers, s.opt.was_given("workers"),
                           s.dist.world_size(), s.opt.batch_size / s.dist.world_size());
  // --deterministic keeps the count: CPU results change in their last bits with it.
  const std::string threads_line =
      apply_thread_plan(s.threads, s.dev.device.is_cpu(), s.opt.deterministic);
  reuse_freed_memory();
  log_info(threads_line);
  if (s.opt.sync_bn && !s.dist.active()) {
    log_warn("--sync-bn is only used in DDP mode; ignored for this single process");
  }
  // YOLOv5's init_seeds(seed + 1 + RANK); DDP then copies rank 0's weights to every rank.
  torch::manual_seed(s.opt.seed + 1 + std::max(s.dist.rank(), 0));
  configure_cudnn(s.opt.deterministic);
}

// Hyperparameters and the run dir (rank 0 picks it; a resume keeps the run's own).
void prepare_run_dir(TrainSetup& s, Checkpoint& resume_ckpt) {
  Options& opt = s.opt;
  s.hyp = apply_hyp_set(load_hyp(opt.hyp), opt.hyp_set, hyp_set_flag(opt));
  std::string line = "hyperparameters: ";
  for (const auto& k : required_hyp_keys()) {
    line +=
        (k == required_hyp_keys().front() ? "" : ", ") + k + "=" + format_number("%g", s.hyp.at(k));
  }
  if (s.hyp.has_dfl) line += ", dfl=" + format_number("%g", s.hyp.dfl);
  log_info(line);
  const bool rank0 = s.dist.is_rank0();
  if (!opt.resume && rank0) {
    opt.save_dir = increment_path((fs::path(opt.project) / opt.name).string(), opt.exist_ok, true);
  }
  // Rank 0 writes the folder, and holds it until the run ends: a second resume of this run, or
  // an --exist-ok start into it, is refused rather than interleaved.
  if (rank0) s.run_lock = RunLock::acquire(opt.save_dir);
  if (opt.resume) resume_ckpt = load_checkpoint(opt.resume_path);
  opt.save_dir = s.dist.from_rank0("save_dir", opt.save_dir);  // only rank 0 writes there
  s.dist.remember_run_dir(opt.save_dir);
  const fs::path wdir = fs::path(opt.save_dir) / "weights";
  if (rank0) fs::create_directories(wdir);
  s.paths = {opt.save_dir, wdir.string(), (wdir / "last.pt").string(), (wdir / "best.pt").string()};
  if (rank0 && !opt.args_yaml.empty()) {
    write_file_atomic((fs::path(opt.save_dir) / "args.yaml").string(), opt.args_yaml);
  }
  if (!s.model_yaml.empty() && !opt.resume) {
    // The architecture from a YOLOv5 checkpoint becomes the run's model YAML (written with
    // opt.yaml): opt.yaml names it, so --resume and val/detect on this run's weights find it.
    opt.cfg = (fs::path(opt.save_dir) / "model.yaml").string();
  }
  if (opt.resume) {
    if (resume_ckpt.epoch + 1 >= opt.epochs) {
      log_info(opt.resume_path + " training to " + std::to_string(opt.epochs) +
               " epochs is finished, nothing to resume.");
      s.already_finished = true;
      s.resume.start_epoch = static_cast<int>(resume_ckpt.epoch) + 1;
      s.resume.best_fitness = resume_ckpt.best_fitness;
      return;
    }
    if (!resume_ckpt.has_optimizer() || resume_ckpt.train_model.empty()) {
      throw std::runtime_error(opt.resume_path +
                               ": has no optimizer state (a stripped best.pt or final last.pt) "
                               "and cannot be resumed; resume from an interrupted run's last.pt");
    }
  }
  s.opt_text = yaml_dump(options_to_yaml(opt));
  s.hyp_text = yaml_dump(hyp_to_yaml(s.hyp));
}

// opt.yaml, hyp.yaml and a YOLOv5 checkpoint's model.yaml, on rank 0 of a new run, once its
// inputs (weights, model, data, images, labels) have been read: a start that fails on them leaves
// the folder as it was, which matters with --exist-ok into another run's folder (its opt.yaml is
// what --resume reads).
void write_run_files(const TrainSetup& s) {
  if (s.opt.resume || !s.dist.is_rank0()) return;
  const fs::path dir = s.opt.save_dir;
  if (!s.model_yaml.empty()) write_file_atomic(s.opt.cfg, s.model_yaml);
  // The texts taken at the start: the optimizer set-up scales weight_decay in s.hyp since.
  write_file_atomic((dir / "hyp.yaml").string(), s.hyp_text);
  write_file_atomic((dir / "opt.yaml").string(), s.opt_text);
}

// --freeze 10 freezes layers 0..9, --freeze 0 1 2 those layers.
void freeze_layers(DetectionModel& model, const std::vector<int>& freeze) {
  std::vector<int> layers;
  if (freeze.size() > 1) {
    layers = freeze;
  } else if (!freeze.empty()) {
    for (int i = 0; i < freeze[0]; ++i) layers.push_back(i);
  }
  int64_t trainable = 0;
  for (auto& kv : model->named_parameters()) {
    for (int l : layers) {
      if (kv.key().rfind("model." + std::to_string(l) + ".", 0) == 0) {
        kv.value().set_requires_grad(false);
        break;
      }
    }
    trainable += kv.value().requires_grad();
  }
  if (trainable == 0) {  // YOLOv5 would fail in its first backward pass
    std::string given;
    for (int f : freeze) given += " " + std::to_string(f);
    throw UsageError("--freeze" + given + " freezes every layer of the model (it has " +
                     std::to_string(model->spec().layers.size()) +
                     "), so nothing would train; freeze fewer (--freeze 10: the backbone)");
  }
}

// The architecture's YAML text and the name its errors give: a YOLOv5 checkpoint's, a resumed
// checkpoint's (the run goes on with the model it started with, whatever became of --cfg's file
// since), else --cfg's file as it reads now.
std::string run_model_yaml(const TrainSetup& s, const Checkpoint& resume_ckpt,
                           std::string& source) {
  const Options& opt = s.opt;
  if (!s.model_yaml.empty()) {
    source = opt.weights + " (its model yaml)";
    return s.model_yaml;
  }
  if (opt.resume && !resume_ckpt.model_yaml.empty()) {
    source = opt.resume_path + " (its model YAML)";
    std::string now;
    try {
      now = read_model_yaml(opt.cfg);
    } catch (const std::exception&) {
    }
    if (now != resume_ckpt.model_yaml) {
      log_warn(opt.cfg + (now.empty() ? " is gone" : " changed since the run started") +
               "; resuming with the model YAML saved in " + opt.resume_path);
    }
    return resume_ckpt.model_yaml;
  }
  source = opt.cfg;
  return read_model_yaml(opt.cfg);
}

// A resumed run keeps the classes its checkpoint was trained on: a data YAML edited since may
// rename them (the checkpoint's names are kept, with a warning), not change their number.
void check_resumed_classes(TrainSetup& s, const Checkpoint& ck) {
  if (ck.names.empty()) return;  // a checkpoint from before they were saved
  if (static_cast<int64_t>(ck.names.size()) != s.nc) {
    throw std::runtime_error(s.opt.resume_path + " was trained on " +
                             std::to_string(ck.names.size()) + " classes but " + s.opt.data +
                             " now names " + std::to_string(s.nc) +
                             "; restore the data YAML the run started with");
  }
  if (ck.names != s.names) {
    log_warn(one_line(s.opt.data + " names the classes differently from " + s.opt.resume_path +
                      " ('" + s.names.front() + "', ... there, '" + ck.names.front() +
                      "', ... in the checkpoint); the run keeps the checkpoint's names"));
    s.names = ck.names;
  }
}

// The dataset (downloaded or generated by rank 0 first) and the model on its device.
void build_run_model(TrainSetup& s, const Checkpoint& resume_ckpt) {
  const Options& opt = s.opt;
  s.data = load_dataset_config(opt.data);
  ensure_dataset(s.data, s.dist.is_rank0(), s.dist.rank0_first("dataset"));
  s.names = opt.single_cls ? std::vector<std::string>{"item"} : s.data.names;
  s.nc = opt.single_cls ? 1 : s.data.nc;
  if (opt.resume) check_resumed_classes(s, resume_ckpt);
  std::string source;
  s.model_yaml_text = run_model_yaml(s, resume_ckpt, source);
  ModelSpec spec = parse_model_spec_string(s.model_yaml_text, source);
  // A hyp file's `anchors: N` (N > 0) builds N placeholder anchors per level for AutoAnchor to
  // fit, as YOLOv5's Model(cfg, anchors=hyp['anchors']).
  const auto typed = hyp_set_words(opt.hyp_set, hyp_set_flag(opt));
  const int hyp_anchors =
      hyp_anchor_count(s.hyp, typed.count("anchors") ? typed.at("anchors") : opt.hyp);
  if (hyp_anchors > 0) {
    log_info("Overriding model.yaml anchors with anchors=" + std::to_string(hyp_anchors));
    spec.anchor_count = hyp_anchors;
    spec.anchors.clear();
  }
  s.model = DetectionModel(std::move(spec), s.nc);
  if (opt.resume) {
    const LoadReport r = load_state_dict(*s.model, resume_ckpt.train_model);
    if (r.transferred != r.total) {
      throw std::runtime_error(opt.resume_path + ": the checkpoint does not match the model " +
                               opt.cfg + " (" + std::to_string(r.transferred) + "/" +
                               std::to_string(r.total) + " entries)");
    }
  } else if (s.weights) {
    // YOLOv5 keeps the anchors of a --cfg or a hyp `anchors:` given with the weights (AutoAnchor
    // may refit them).
    std::vector<std::string> exclude;
    if (opt.was_given("cfg") || hyp_anchors > 0) exclude.push_back("anchor");
    load_weights(*s.model, *s.weights, opt.weights, exclude);
    s.weights.reset();
  }
  s.model->to(s.dev.device);
  // auto: channels-last on the CPU (oneDNN) and on CUDA, where AMP's tensor-core convolutions
  // run on NHWC (the plain-PyTorch reference: 2x the images/s of NCHW on an H100).
  s.channels_last = s.opt.memory_format != "contiguous";
  if (s.channels_last) to_channels_last(*s.model);
  log_info(s.model->summary());
  freeze_layers(s.model, opt.freeze);
  s.stride = s.model->max_stride();
  s.imgsz = check_img_size(opt.imgsz, s.stride);
}

// --batch-size -1: AutoBatch picks it (one process only: DDP refuses -1). opt.yaml records the
// choice, so a resume trains on with it.
void choose_batch_size(TrainSetup& s) {
  if (s.opt.batch_size != -1) return;
  s.opt.batch_size = autobatch(s.model, s.imgsz, s.dev.device.is_cuda(), s.dev.device);
  s.opt_text = yaml_dump(options_to_yaml(s.opt));
}

// Ultralytics' optimizer=auto: AdamW at lr0 0.01 / (4 + nc) for at most 10,000 iterations (of
// the nominal batch), else MuSGD at 0.01, for every model family; momentum 0.9 and bias warmup
// from 0 either way. Sets the hyperparameters it chooses.
std::string resolve_auto_optimizer(TrainSetup& s) {
  const int64_t images = static_cast<int64_t>(s.train_set->size());
  const int64_t per_epoch = (images + std::max(s.opt.batch_size, kNominalBatch) - 1) /
                            std::max(s.opt.batch_size, kNominalBatch);
  const int64_t iterations = per_epoch * s.opt.epochs;
  const bool long_run = iterations > 10000;
  s.hyp.lr0 = long_run ? 0.01 : std::nearbyint(0.01 / (4 + s.nc) * 1e6) / 1e6;
  s.hyp.momentum = 0.9;
  s.hyp.warmup_bias_lr = 0.0;
  const std::string name = long_run ? "MuSGD" : "AdamW";
  // Values the user gave are named as typed; the hyp file only for what came from it.
  std::string given, from_file;
  const auto words = hyp_set_words(s.opt.hyp_set, hyp_set_flag(s.opt));
  for (const char* key : {"lr0", "momentum", "warmup_bias_lr"}) {
    const auto w = words.find(key);
    if (w != words.end()) {
      given += (given.empty() ? "" : ", ") + w->second;
    } else {
      from_file += (from_file.empty() ? "" : ", ") + std::string(key);
    }
  }
  log_info("optimizer: 'auto' chose " + name + "(lr=" + format_number("%g", s.hyp.lr0) +
           ", momentum=0.9) for " + std::to_string(iterations) +
           " iterations, as Ultralytics' optimizer=auto" +
           (from_file.empty() ? "" : " (" + from_file + " of " + s.opt.hyp + " not used)"));
  if (!given.empty()) {
    const bool yolo = hyp_set_flag(s.opt).empty();
    log_warn(given + (given.find(',') == std::string::npos ? " is" : " are") +
             " not used: the 'auto' optimizer chooses lr0 and momentum itself, as "
             "Ultralytics'; to train with them choose the optimizer (" +
             (yolo ? "optimizer=SGD, AdamW or MuSGD" : "--optimizer SGD, AdamW or MuSGD") + ")");
  }
  return name;
}

// YOLOv5's optimizer: nominal batch 64, weight decay scaled to it, three parameter groups.
void build_optimizer(TrainSetup& s) {
  Hyp& hyp = s.hyp;
  Schedule& sc = s.schedule;
  sc.batch_size = s.opt.batch_size;
  sc.accumulate = std::max(
      static_cast<int>(std::nearbyint(static_cast<double>(kNominalBatch) / sc.batch_size)), 1);
  hyp.weight_decay = hyp.weight_decay * sc.batch_size * sc.accumulate / kNominalBatch;
  if (s.opt.optimizer == "auto") s.loop.optimizer = resolve_auto_optimizer(s);
  ModelOptimizer mo =
      make_model_optimizer(s.loop.optimizer, *s.model, hyp.lr0, hyp.momentum, hyp.weight_decay);
  s.optimizer = std::move(mo.optimizer);
  const ParamGroups &groups = mo.groups, &boosted = mo.boosted;
  const auto count = [&](auto ParamGroups::*field) {
    return std::to_string((groups.*field).size() + (boosted.*field).size());
  };
  const size_t n_boosted = boosted.bias.size() + boosted.weight.size() + boosted.bn.size();
  log_info("optimizer: " + s.loop.optimizer + "(lr=" + format_number("%g", hyp.lr0) +
           ") with parameter groups " + count(&ParamGroups::bn) + " weight(decay=0.0), " +
           count(&ParamGroups::weight) + " weight(decay=" + format_number("%g", hyp.weight_decay) +
           "), " + count(&ParamGroups::bias) + " bias" +
           (n_boosted ? "; the classification branches' " + std::to_string(n_boosted) + " at 3x lr"
                      : std::string()));
  sc.lf = lr_lambda(s.opt.cos_lr, s.opt.epochs, hyp.lrf);
  sc.lr0 = hyp.lr0;
  sc.warmup_epochs = hyp.warmup_epochs;
  sc.warmup_bias_lr = hyp.warmup_bias_lr;
  sc.warmup_momentum = hyp.warmup_momentum;
  sc.momentum = hyp.momentum;
  for (size_t g = 0; g < s.optimizer->param_groups().size(); ++g) {
    set_group_lr(*s.optimizer, g, sc.lr0 * group_lr_factor(g) * sc.lf(0));
  }
}

// The augmentation settings of the hyperparameters read at start (ranges checked, errors name the
// hyp file and key).
AugmentHyp augment_hyp(const Hyp& hyp, const Options& opt) {
  std::map<std::string, double> values;
  for (const auto& k : required_hyp_keys()) values[k] = hyp.at(k);
  return AugmentHyp::from_map(values, opt.hyp, hyp_set_words(opt.hyp_set, hyp_set_flag(opt)));
}

// The training loader (this rank's share of the batch) and the validation loader (this rank's
// share of the batches).
void build_loaders(TrainSetup& s) {
  const Options& opt = s.opt;
  const DatasetConfig& data = s.data;
  const int world = s.dist.world_size();
  const int rank_batch = opt.batch_size / world;
  DatasetOptions tr;
  tr.imgsz = s.imgsz;
  tr.batch_size = rank_batch;
  tr.augment = true;
  tr.rect = opt.rect;
  tr.single_cls = opt.single_cls;
  tr.stride = s.stride;
  tr.pad = 0.0;
  tr.cache = opt.cache;
  tr.cache_dir = resolve_cache_dir(opt.cache_dir);
  tr.hyp = augment_hyp(s.hyp, opt);
  tr.nc = s.nc;
  // Ultralytics' rule: mosaic off from epoch epochs - N on (so not at all in runs of <= N).
  if (opt.close_mosaic > 0) tr.close_mosaic_epoch = std::max(0, opt.epochs - opt.close_mosaic);
  tr.ranks = s.dist.exchange();  // every rank checks a share of the labels
  // Every rank on this host keeps its own decoded images: they share the memory budget.
  tr.image_cache_bytes = default_image_cache_bytes(s.dist.env().local_world_size);
  s.train_set = std::make_shared<YoloDataset>(data.train, tr);
  LoaderOptions tl;
  tl.batch_size = rank_batch;
  tl.world_size = world;
  tl.rank = std::max(s.dist.rank(), 0);
  tl.workers = s.threads.workers;
  tl.pin_memory = s.dev.device.is_cuda();  // as YOLOv5's loader: copies overlap the GPU's work
  tl.device = s.dev.device;
  tl.float_images = false;  // bytes to the device (a quarter of float32's), converted there
  tl.recipes = s.augment_on_device;
  tl.quad = opt.quad;
  tl.shuffle = !opt.rect;
  // Image weights re-draw the dataset's indices after each validation; nothing may load then.
  tl.prefetch_next_epoch = !opt.image_weights;
  tl.seed = static_cast<uint64_t>(opt.seed);
  s.train_loader = std::make_unique<DataLoader>(s.train_set, tl);
  // Validation: every rank its contiguous share of the batches (rank 0 joins the statistics).
  DatasetOptions va = tr;
  va.augment = false;
  va.rect = true;
  va.pad = 0.5;
  va.batch_size = rank_batch * 2;
  va.hyp = AugmentHyp::none();
  va.close_mosaic_epoch = -1;
  LoaderOptions vl = tl;
  vl.recipes = false;  // validation has no augmentation: letterboxed bytes are the cheapest
  vl.batch_size = rank_batch * 2;
  vl.shuffle = false;
  vl.prefetch_next_epoch = true;  // the next validation's first batches wait during training
  vl.contiguous_batches = true;
  s.val_loader = std::make_unique<DataLoader>(std::make_shared<YoloDataset>(data.val, va), vl);
}

// AutoAnchor on rank 0 (DDP copies its anchors to the other ranks); a resumed model keeps its own.
void check_model_anchors(TrainSetup& s) {
  if (s.opt.noautoanchor || s.opt.resume || !s.dist.is_rank0()) return;
  if (!model_family(*s.model).fits_anchors) return;
  std::vector<std::array<float, 2>> image_wh;
  std::vector<std::vector<std::array<float, 2>>> labels_wh;
  for (size_t i = 0; i < s.train_set->size(); ++i) {
    const cv::Size sz = s.train_set->image_sizes()[i];
    image_wh.push_back({static_cast<float>(sz.width), static_cast<float>(sz.height)});
    std::vector<std::array<float, 2>> wh;
    for (const auto& l : s.train_set->labels()[i]) wh.push_back({l.w, l.h});
    labels_wh.push_back(std::move(wh));
  }
  auto det = s.model->detect();
  const at::Tensor stride = det->stride.to(s.dev.device).view({-1, 1, 1});
  const AutoAnchorResult aa =
      check_anchors(image_wh, labels_wh, (det->anchors * stride).cpu(), s.model->strides(),
                    s.hyp.anchor_t, s.imgsz, static_cast<uint64_t>(s.opt.seed));
  log_info(aa.message);
  if (aa.replaced) {
    torch::NoGradGuard no_grad;
    det->anchors.copy_(aa.anchors_px.to(det->anchors.device()) / stride);
  }
}

// The EMA on rank 0 (a second instance of the model, made after AutoAnchor so that it starts with
// the anchors; the other ranks' instance gets rank 0's weights before each validation), then a
// resumed run's EMA, optimizer and counters.
void build_ema_and_resume(TrainSetup& s, const Checkpoint& resume_ckpt) {
  const bool rank0 = s.dist.is_rank0();
  // Every rank validates the EMA (the others get rank 0's before each validation).
  s.ema_model = DetectionModel(s.model->spec());
  s.ema_model->to(s.dev.device);
  if (s.channels_last) to_channels_last(*s.ema_model);
  if (rank0) s.ema = std::make_unique<ModelEMA>(s.ema_model.ptr(), *s.model);
  if (!s.opt.resume) return;
  if (rank0) {
    load_state_dict(*s.ema_model, resume_ckpt.model);
    s.ema->set_updates(resume_ckpt.ema_updates);
  }
  const std::string saved = optimizer_state_type(resume_ckpt.optimizer);
  if (!saved.empty() && saved != s.loop.optimizer) {
    const std::string opt_yaml = (fs::path(s.opt.save_dir) / "opt.yaml").string();
    throw std::runtime_error(
        opt_yaml + ": optimizer is " + s.loop.optimizer + ", but " + s.opt.resume_path +
        " was trained with " + saved + " (its optimizer state); set 'optimizer: " + saved +
        "' in " + opt_yaml + " to resume, or start a new run from these weights (" + "--weights " +
        shell_word(s.opt.resume_path) + " --optimizer " + s.loop.optimizer + ")");
  }
  load_optimizer_state(*s.optimizer, s.loop.optimizer, resume_ckpt.optimizer);
  s.resume.start_epoch = static_cast<int>(resume_ckpt.epoch) + 1;
  s.resume.best_fitness = resume_ckpt.best_fitness;
  s.resume.last_opt_step = resume_ckpt.last_opt_step;
  log_info("Resuming training from " + s.opt.resume_path + " from epoch " +
           std::to_string(s.resume.start_epoch) + " to " + std::to_string(s.opt.epochs) +
           " total epochs on " + s.opt.data);
}

// A module's parameters then buffers, by name.
std::vector<std::pair<std::string, at::Tensor>> named_state(torch::nn::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& p : m.named_parameters()) state.emplace_back(p.key(), p.value());
  for (const auto& b : m.named_buffers()) state.emplace_back(b.key(), b.value());
  return state;
}

// DDP: SyncBatchNorm (same tensors, so the optimizer keeps them), rank 0's weights and buffers
// (anchors included) on every rank, and gradient all-reduce hooks. Several GPUs without torchrun:
// DataParallel in this process, as YOLOv5 does.
void wrap_parallel(TrainSetup& s) {
  DetectionModel& model = s.model;
  if (s.dist.active()) {
    if (s.opt.sync_bn) {
      const int n = convert_sync_batchnorm(*model, s.dist.group());
      log_info("Using SyncBatchNorm() for " + std::to_string(n) + " layers");
    }
    std::vector<at::Tensor> state = model->parameters();
    for (const auto& b : model->buffers()) state.push_back(b);
    broadcast_coalesced(*s.dist.group(), state, 0);
    if (!s.opt.sync_bn) s.ddp_buffers = model->buffers();
    std::vector<at::Tensor> trainable;
    std::vector<std::string> names;
    for (const auto& p : model->named_parameters()) {
      if (!p.value().requires_grad()) continue;
      trainable.push_back(p.value());
      names.push_back(p.key());
    }
    s.grad_sync = std::make_unique<GradSync>(s.dist.group(), trainable, 0, 1 << 20, names);
  }
  if (!s.dist.active() && s.dev.cuda_ids.size() > 1) {
    log_warn(
        "DP not recommended, use torchrun (or --nproc-per-node) for best DDP Multi-GPU "
        "results; see docs/distributed.md");
    std::vector<torch::Device> devices;
    for (int id : s.dev.cuda_ids) {
      devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(id));
    }
    s.dp = std::make_unique<DataParallel>(model, devices);
  }
}

}  // namespace

TrainSetup::TrainSetup() = default;
TrainSetup::TrainSetup(TrainSetup&&) noexcept = default;
TrainSetup& TrainSetup::operator=(TrainSetup&&) noexcept = default;
TrainSetup::~TrainSetup() = default;

TrainSetup set_up_training(TrainConfig cfg) {
  TrainSetup s;
  // A folder named up front (--exist-ok, --resume) is locked before the device, the process group
  // and the data take their seconds: a second run into it is refused while the first sets up,
  // before either writes there. prepare_run_dir takes this same lock.
  const Options& o = cfg.opt();
  if ((o.exist_ok || o.resume) && read_dist_env(o.local_rank).is_rank0()) {
    const std::string dir = o.resume ? o.save_dir : (fs::path(o.project) / o.name).string();
    make_folders(dir);
    s.run_lock = RunLock::acquire(dir);
  }
  start_run(s, std::move(cfg));
  Checkpoint resume_ckpt;
  prepare_run_dir(s, resume_ckpt);
  if (s.already_finished) return s;
  build_run_model(s, resume_ckpt);
  s.dist.check_same_model(named_state(*s.model));  // before a rank spends hours on its data
  choose_batch_size(s);
  build_loaders(s);  // before the optimizer: --optimizer auto counts the training images
  // A rank still filling its --cache cannot trip the first collective's --dist-timeout.
  s.dist.store_barrier("loaders");
  build_optimizer(s);
  check_model_anchors(s);
  build_ema_and_resume(s, resume_ckpt);
  wrap_parallel(s);
  // Mixed precision on CUDA, as YOLOv5 (its check_amp passes on any CUDA device we support).
  s.amp = s.dev.device.is_cuda();
  if (s.amp) log_info("AMP: mixed precision (autocast + gradient scaling) on " + s.dev.description);
  LossConfig loss_config;
  loss_config.anchor_based =
      scale_loss_gains(s.hyp, s.model->head().num_levels(), s.nc, s.imgsz, s.opt.label_smoothing);
  loss_config.anchor_free = {s.hyp.box, s.hyp.cls, s.hyp.dfl};
  s.loss = model_family(*s.model).make_loss(*s.model, loss_config);
  write_run_files(s);
  return s;
}

}  // namespace yolo

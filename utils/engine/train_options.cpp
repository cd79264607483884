#include "utils/engine/train_options.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "utils/core/errors.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/yaml_io.h"
#include "utils/engine/hyp.h"

namespace yolo {

bool Options::was_given(const std::string& flag) const {
  return std::find(given.begin(), given.end(), flag) != given.end();
}

namespace {

using cli::at_least;
using cli::Bind;
using cli::empty_or_one_of;

std::string check_batch_size(const int& v) {
  if (v == -1) return "";  // AutoBatch
  const std::string bad = cli::at_least(1)(v);
  return bad.empty() ? "" : bad + " (or -1 for AutoBatch)";
}
std::string check_optimizer(const std::string& v) {
  if (v == "SGD" || v == "Adam" || v == "AdamW" || v == "MuSGD" || v == "auto") return "";
  return "unknown optimizer '" + v + "'; choose SGD, Adam, AdamW, MuSGD or auto";
}
std::string check_project(const std::string& v) { return v.empty() ? "must not be empty" : ""; }
std::string check_label_smoothing(const double& v) {
  return v >= 0.0 && v < 1.0 ? "" : "must be in [0, 1)";
}
std::string check_freeze(const std::vector<int>& v) {
  for (int f : v) {
    if (f < 0) return "layer indices must be >= 0 (got " + std::to_string(f) + ")";
  }
  return "";
}
// 0 is "not given" (Options built in code); parse_nproc already refuses 0 and 1 on the command
// line.
std::string check_nproc(const int& v) {
  if (v == 0 || v == -1 || v >= 2) return "";
  return "must be 'auto' or a number of processes >= 2 (got " + std::to_string(v) +
         "); to train in one process leave the flag out";
}

// --nproc-per-node's value: "auto" -> -1, else an integer >= 2 (0 would read as "not given").
int parse_nproc(const std::string& v) {
  if (v == "auto") return -1;
  int n = 0;
  try {
    n = cli::parse_int("nproc-per-node", v);
  } catch (const UsageError&) {
  }
  if (n < 2) {
    throw UsageError("--nproc-per-node: expected 'auto' or a number of processes >= 2, got '" + v +
                     "'; to train in one process leave the flag out");
  }
  return n;
}

void parse_resume(Options& o, const std::string& path) {
  o.resume = true;
  o.resume_path = path;  // empty: the latest last.pt under runs/
}

// resume is three-valued in opt.yaml, as YOLOv5 writes it: false, true (the latest run) or the
// checkpoint path.
YAML::Node write_resume(const Options& o) {
  if (!o.resume) return YAML::Node(false);
  return o.resume_path.empty() ? YAML::Node(true) : YAML::Node(o.resume_path);
}
void read_resume(Options& o, const YAML::Node& v) {
  bool flag = false;
  if (YAML::convert<bool>::decode(v, flag)) {
    o.resume = flag;
  } else {
    o.resume = true;
    o.resume_path = v.as<std::string>();
  }
}

// YOLOv5 inlines the hyp dict in opt.yaml: no file to name then.
void read_hyp(Options& o, const YAML::Node& v) {
  o.hyp = v.IsMap() ? std::string() : v.as<std::string>();
}

constexpr char kCacheDirHelp[] =
    "folder for the label caches and --cache disk files, e.g. for a read-only dataset (default: "
    "beside the data, or $YOLO_CACHE_DIR)";

// Every train flag, in opt.yaml's key order (YOLOv5 v7.0 train.py's, with this trainer's own
// flags near the end). Defaults are Options' initializers.
const std::vector<Flag>& flags() {
  using O = Options;
  static const std::vector<Flag> table = {
      Bind("weights", &O::weights, "weights", "initial weights path ('' = from scratch)")
          .metavar("PATH"),
      Bind("cfg", &O::cfg, "cfg", "model YAML path or bare name (configs/models)").metavar("PATH"),
      Bind("data", &O::data, "data", "dataset YAML path or bare name (configs/data)")
          .metavar("PATH")
          .check(cli::not_empty),
      Bind("hyp", &O::hyp, "hyp", "hyperparameters YAML path or bare name (hyp/)")
          .metavar("PATH")
          .yaml_with(nullptr, read_hyp),
      Bind("hyp-set", &O::hyp_set, "hyp_set",
           "hyperparameters over the --hyp file's: --hyp-set lr0=0.02 mosaic=0.5")
          .metavar("KEY=VALUE")
          .check(check_hyp_set),
      Bind("epochs", &O::epochs, "epochs", "total training epochs").check(at_least(1)),
      Bind("batch-size", &O::batch_size, "batch_size", "total batch size for all ranks")
          .alias("--batch")
          .check(check_batch_size),
      Bind("imgsz", &O::imgsz, "imgsz", "train, val image size in pixels")
          .alias("--img")
          .alias("--img-size")
          .check(cli::image_size),
      Bind("rect", &O::rect, "rect", "rectangular training"),
      Bind("resume", &O::resume, "resume", "resume most recent training, or the given last.pt")
          .optional("")
          .metavar("PATH")
          .parse_with(parse_resume)
          .yaml_with(write_resume, read_resume),
      Bind("nosave", &O::nosave, "nosave", "only save final checkpoint"),
      Bind("noval", &O::noval, "noval", "only validate final epoch"),
      Bind("noautoanchor", &O::noautoanchor, "noautoanchor", "disable AutoAnchor"),
      Bind("noplots", &O::noplots, "noplots", "save no plot files"),
      Bind("evolve", &O::evolve, "evolve", "evolve hyperparameters for N generations")
          .optional("300")
          .check(at_least(0, "generations must be >= 1")),
      Bind("cache", &O::cache, "cache", "cache images in RAM or on disk")
          .optional("ram")
          .metavar("ram|disk")
          .check(empty_or_one_of({"ram", "disk"})),
      Bind("image-weights", &O::image_weights, "image_weights",
           "use weighted image selection for training"),
      Bind("device", &O::device, "device", "cuda device, i.e. 0 or 0,1,2,3 or cpu"),
      Bind("multi-scale", &O::multi_scale, "multi_scale", "vary img-size +/- 50%"),
      Bind("single-cls", &O::single_cls, "single_cls", "train multi-class data as single-class"),
      Bind("optimizer", &O::optimizer, "optimizer", "optimizer")
          .metavar("SGD|Adam|AdamW|MuSGD|auto")
          .check(check_optimizer),
      Bind("sync-bn", &O::sync_bn, "sync_bn", "use SyncBatchNorm, only available in DDP mode")
          .alias("--sync_bn"),
      Bind("workers", &O::workers, "workers", "max dataloader workers (per rank in DDP mode)")
          .check(at_least(0)),
      Bind("project", &O::project, "project", "save to project/name")
          .metavar("DIR")
          .check(check_project),
      Bind("name", &O::name, "name", "save to project/name").check(cli::run_name),
      Bind("exist-ok", &O::exist_ok, "exist_ok", "existing project/name ok, do not increment"),
      Bind("quad", &O::quad, "quad", "quad dataloader"),
      Bind("close-mosaic", &O::close_mosaic, "close_mosaic",
           "train the last N epochs without mosaic (default -1: 0, or 10 for YOLOv8/YOLO11)")
          .metavar("N")
          .check(at_least(-1, "must be >= 0 (or -1: the model family's)")),
      Bind("cos-lr", &O::cos_lr, "cos_lr", "cosine LR scheduler"),
      Bind("label-smoothing", &O::label_smoothing, "label_smoothing", "label smoothing epsilon")
          .metavar("EPS")
          .check(check_label_smoothing),
      Bind("patience", &O::patience, "patience",
           "EarlyStopping patience (epochs without improvement)")
          .check(at_least(0, "must be >= 0 (0 disables early stopping)")),
      Bind("freeze", &O::freeze, "freeze", "freeze layers: backbone=10, first3=0 1 2")
          .check(check_freeze),
      Bind("save-period", &O::save_period, "save_period",
           "save checkpoint every x epochs (disabled if < 1)"),
      Bind("seed", &O::seed, "seed", "global training seed"),
      Bind("deterministic", &O::deterministic, "deterministic",
           "deterministic training: cuDNN autotuning off, deterministic algorithms where they "
           "exist"),
      Bind("memory-format", &O::memory_format, "memory_format",
           "activation layout: channels-last (NHWC), contiguous (NCHW), or auto: channels-last "
           "on CPU (oneDNN) and CUDA (AMP's tensor-core convolutions), both faster on it")
          .metavar("auto|channels-last|contiguous")
          .check(empty_or_one_of({"auto", "channels-last", "contiguous"})),
      Bind("augment-device", &O::augment_device, "augment_device",
           "where training augmentation runs: cpu (OpenCV in the loader workers) or cuda "
           "(batched on the training GPU; the workers only decode)")
          .metavar("cpu|cuda")
          .check(empty_or_one_of({"cpu", "cuda"})),
      Bind("local_rank", &O::local_rank, "local_rank",
           "automatic DDP multi-GPU argument, do not modify")
          .alias("--local-rank"),
      Bind("dist-backend", &O::dist_backend, "dist_backend",
           "process group backend (default: nccl on CUDA, gloo on CPU)")
          .metavar("nccl|gloo")
          .check(empty_or_one_of({"nccl", "gloo"})),
      Bind("dist-timeout", &O::dist_timeout, "dist_timeout",
           "process group timeout in seconds (0: 60 for gloo, 600 for nccl)")
          .metavar("SECONDS")
          .check(at_least(0, "must be >= 0 seconds")),
      Bind("cache-dir", &O::cache_dir, "", kCacheDirHelp).metavar("DIR"),
      // Not in opt.yaml (--cache-dir neither): a resume may use them or not.
      Bind("nproc-per-node", &O::nproc_per_node, "",
           "start N DDP worker processes of train on this machine (N >= 2, or 'auto': one per "
           "GPU, 2 on CPU); no torchrun needed")
          .alias("--nproc_per_node")
          .metavar("N|auto")
          .no_default()
          .parse_with([](O& o, const std::string& v) { o.nproc_per_node = parse_nproc(v); })
          .check(check_nproc),
      // Not in opt.yaml: Ultralytics' record of the run, which the yolo command hands over.
      Bind("args-yaml", &O::args_yaml, "",
           "text written as the run's args.yaml (the yolo command passes its keys)")
          .metavar("TEXT")
          .no_default(),
      Bind("save_dir", &O::save_dir, "save_dir", "").yaml_only(),  // set by train
  };
  return table;
}

}  // namespace

std::string train_help() {
  return cli::help_text(cli::specs_of(flags()), "Train a YOLOv5 model (YOLOv5 v7.0 train.py flags)",
                        "train", version_help());
}

CommandLine parse_train_args(int argc, const char* const* argv) {
  cli::Parsed<Options> p = cli::parse(flags(), argc, argv, "train");
  CommandLine out;
  out.help = p.help;
  out.version = p.version;
  if (p.help) out.help_text = train_help();
  if (p.help || p.version) return out;
  out.opt = std::move(p.values);
  out.opt.given = std::move(p.given);
  const std::string bad = bad_option_value(out.opt);
  if (!bad.empty()) throw UsageError(bad);
  return out;
}

std::string bad_option_value(const Options& o) { return cli::first_bad_value(flags(), o); }

YAML::Node options_to_yaml(const Options& o) {
  YAML::Node n;
  for (const Flag& f : flags()) {
    if (!f.yaml_key.empty()) n[f.yaml_key] = f.write(o);
  }
  return n;
}

// Keys the file lacks, or holds null, keep their defaults: YOLOv5's files lack this trainer's
// own keys and write null for unset optional values. A key neither knows, or a value its flag
// would refuse, is an error naming the file, line and key: a typo must not quietly fall back to
// a default, nor a hand edit run what the flag would never have run.
Options options_from_yaml(const YAML::Node& n, const std::string& ctx) {
  if (!n.IsMap()) throw std::runtime_error(ctx + ": expected a mapping of option names to values");
  // YOLOv5 v7.0 train.py's options for its loggers and cloud storage: accepted, not used.
  static const std::vector<std::string> kYolov5Only = {"bucket", "entity", "upload_dataset",
                                                       "bbox_interval", "artifact_alias"};
  auto at = [&ctx](const YAML::Node& node) {
    return ctx + ":" + std::to_string(node.Mark().line + 1) + ": ";
  };
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const bool known = std::any_of(flags().begin(), flags().end(),
                                   [&](const Flag& f) { return f.yaml_key == key; }) ||
                       std::count(kYolov5Only.begin(), kYolov5Only.end(), key) > 0;
    if (!known) {
      throw std::runtime_error(at(kv.first) + "unknown key '" + key +
                               "'; opt.yaml holds train's options by their YOLOv5 names "
                               "(train --help lists them)");
    }
  }
  Options o;
  for (const Flag& f : flags()) {
    if (f.yaml_key.empty()) continue;
    const YAML::Node v = n[f.yaml_key];
    if (!v || v.IsNull()) continue;
    try {
      f.read(o, v);
    } catch (const YAML::Exception&) {
      throw std::runtime_error(at(v) + "key '" + f.yaml_key + "' has the wrong type");
    }
    if (f.check) {
      if (const std::string bad = f.check(o); !bad.empty()) {
        throw std::runtime_error(at(v) + "key '" + f.yaml_key + "': " + bad);
      }
    }
  }
  return o;
}

void save_options(const Options& opt, const std::string& path) {
  save_yaml_file(options_to_yaml(opt), path);
}

Options load_options(const std::string& path) {
  return options_from_yaml(load_yaml_file(path), path);
}

}  // namespace yolo

#include "utils/options.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <set>

#include "utils/errors.h"
#include "utils/fs_atomic.h"
#include "utils/log.h"
#include "utils/paths.h"
#include "utils/yaml_io.h"

namespace yolo {

bool Options::was_given(const std::string& flag) const {
  return std::find(given.begin(), given.end(), flag) != given.end();
}

namespace {

// Flags parsed for compatibility whose feature has not landed yet: giving one is an error rather
// than being silently ignored. Each later feature removes its entry.
const std::set<std::string> kNotImplementedYet = {"quad"};

bool looks_like_value(const std::string& s) {
  if (s.empty()) return true;
  if (s.rfind("--", 0) == 0) return false;
  if (s[0] == '-') {  // a negative number is a value, "-x" a flag
    return s.size() > 1 && (std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.');
  }
  return true;
}

// argparse accepts spellings cxxopts does not: aliases (--img, --img-size, --batch), optional
// values given as the next word (--resume path, --evolve 10, --cache disk) and nargs='+' lists
// (--freeze 0 1 2). Rewrite them into cxxopts' forms (--flag=value, comma lists).
std::vector<std::string> normalize_argv(int argc, const char* const* argv) {
  static const std::vector<std::pair<std::string, std::string>> kAliases = {
      {"--img", "--imgsz"},        {"--img-size", "--imgsz"},
      {"--batch", "--batch-size"}, {"--local-rank", "--local_rank"},
      {"--sync_bn", "--sync-bn"},  {"--nproc_per_node", "--nproc-per-node"},
  };
  static const std::set<std::string> kOptionalValue = {"--resume", "--evolve", "--cache"};
  std::vector<std::string> out;
  if (argc > 0) out.emplace_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string name = a, value;
    const bool has_eq = a.rfind("--", 0) == 0 && a.find('=') != std::string::npos;
    if (has_eq) {
      name = a.substr(0, a.find('='));
      value = a.substr(a.find('=') + 1);
    }
    for (const auto& [from, to] : kAliases) {
      if (name == from) name = to;
    }
    if (has_eq) {
      out.push_back(name + "=" + value);
      continue;
    }
    if (kOptionalValue.count(name)) {
      if (i + 1 < argc && looks_like_value(argv[i + 1])) {
        out.push_back(name + "=" + argv[++i]);
      } else {
        out.push_back(name);
      }
      continue;
    }
    if (name == "--freeze") {
      std::string list;
      while (i + 1 < argc && looks_like_value(argv[i + 1]))
        list += (list.empty() ? "" : ",") + std::string(argv[++i]);
      if (list.empty()) throw UsageError("--freeze: expected one or more layer indices");
      out.push_back(name + "=" + list);
      continue;
    }
    out.push_back(name);
  }
  return out;
}

int parse_int(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const long x = std::stol(v, &used);
    if (used == v.size() && x >= INT32_MIN && x <= INT32_MAX) return static_cast<int>(x);
  } catch (const std::exception&) {
  }
  throw UsageError("--" + flag + ": expected an integer, got '" + v + "'");
}

double parse_double(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + flag + ": expected a number, got '" + v + "'");
}

int to_int(const cxxopts::ParseResult& r, const std::string& flag) {
  return parse_int(flag, r[flag].as<std::string>());
}

double to_double(const cxxopts::ParseResult& r, const std::string& flag) {
  return parse_double(flag, r[flag].as<std::string>());
}

// --nproc-per-node's value: "auto" -> -1, else an integer >= 2 (0 would read as "not given").
int parse_nproc(const std::string& v) {
  if (v == "auto") return -1;
  int n = 0;
  try {
    n = parse_int("nproc-per-node", v);
  } catch (const UsageError&) {
  }
  if (n < 2) {
    throw UsageError("--nproc-per-node: expected 'auto' or a number of processes >= 2, got '" + v +
                     "'; to train in one process leave the flag out");
  }
  return n;
}

cxxopts::Options make_cli() {
  cxxopts::Options o("train", "Train a YOLOv5 model (YOLOv5 v7.0 train.py flags)");
  o.custom_help("[flags]");
  o.add_options()("weights", "initial weights path ('' = from scratch)",
                  cxxopts::value<std::string>()->default_value(""))(
      "cfg", "model YAML path or bare name (configs/models)",
      cxxopts::value<std::string>()->default_value(""))(
      "data", "dataset YAML path or bare name (configs/data)",
      cxxopts::value<std::string>()->default_value("shapes.yaml"))(
      "hyp", "hyperparameters YAML path or bare name (hyp/)",
      cxxopts::value<std::string>()->default_value("hyp.scratch-low.yaml"))(
      "epochs", "total training epochs", cxxopts::value<std::string>()->default_value("100"))(
      "batch-size", "total batch size for all ranks (alias --batch)",
      cxxopts::value<std::string>()->default_value("16"))(
      "imgsz", "train, val image size in pixels (aliases --img, --img-size)",
      cxxopts::value<std::string>()->default_value("640"))("rect", "rectangular training")(
      "resume", "resume most recent training, or the given last.pt",
      cxxopts::value<std::string>()->implicit_value(""))("nosave", "only save final checkpoint")(
      "noval", "only validate final epoch")("noautoanchor", "disable AutoAnchor")(
      "noplots", "save no plot files")("evolve",
                                       "evolve hyperparameters for N generations (bare: 300)",
                                       cxxopts::value<std::string>()->implicit_value("300"))(
      "cache", "cache images in 'ram' (bare) or 'disk'",
      cxxopts::value<std::string>()->implicit_value("ram"))(
      "image-weights", "use weighted image selection for training")(
      "device", "cuda device, i.e. 0 or 0,1,2,3 or cpu",
      cxxopts::value<std::string>()->default_value(""))("multi-scale", "vary img-size +/- 50%")(
      "single-cls", "train multi-class data as single-class")(
      "optimizer", "SGD, Adam or AdamW", cxxopts::value<std::string>()->default_value("SGD"))(
      "sync-bn", "use SyncBatchNorm, only available in DDP mode")(
      "workers", "max dataloader workers (per rank in DDP mode)",
      cxxopts::value<std::string>()->default_value("8"))(
      "project", "save to project/name",
      cxxopts::value<std::string>()->default_value("runs/train"))(
      "name", "save to project/name", cxxopts::value<std::string>()->default_value("exp"))(
      "exist-ok", "existing project/name ok, do not increment")("quad", "quad dataloader")(
      "cos-lr", "cosine LR scheduler")("label-smoothing", "label smoothing epsilon",
                                       cxxopts::value<std::string>()->default_value("0.0"))(
      "patience", "EarlyStopping patience (epochs without improvement)",
      cxxopts::value<std::string>()->default_value("100"))(
      "freeze", "freeze layers: backbone=10, first3=0 1 2",
      cxxopts::value<std::vector<std::string>>()->default_value("0"))(
      "save-period", "save checkpoint every x epochs (disabled if < 1)",
      cxxopts::value<std::string>()->default_value("-1"))(
      "seed", "global training seed", cxxopts::value<std::string>()->default_value("0"))(
      "local_rank", "automatic DDP multi-GPU argument, do not modify",
      cxxopts::value<std::string>()->default_value("-1"))(
      "dist-backend", "process group backend: nccl or gloo (default: nccl on CUDA, gloo on CPU)",
      cxxopts::value<std::string>()->default_value(""))(
      "dist-timeout", "process group timeout in seconds (0: 60 for gloo, NCCL's default)",
      cxxopts::value<std::string>()->default_value("0"))(
      "nproc-per-node",
      "start N DDP worker processes of train on this machine (N >= 2, or 'auto': one per GPU, "
      "2 on CPU); no torchrun needed",
      cxxopts::value<std::string>())(
      "deterministic",
      "deterministic training: cuDNN autotuning off, deterministic algorithms where they exist")(
      "version", "print the versions of LibTorch, CUDA, cuDNN, NCCL and the GPUs seen, and exit")(
      "h,help", "show this help and exit");
  return o;
}

}  // namespace

int check_img_size(int imgsz, int stride) {
  if (imgsz < 1) throw UsageError("--imgsz: must be >= 1 (got " + std::to_string(imgsz) + ")");
  const int rounded = std::max((imgsz + stride - 1) / stride * stride, 2 * stride);
  if (rounded != imgsz) {
    log_warn("--imgsz " + std::to_string(imgsz) + " must be multiple of max stride " +
             std::to_string(stride) + ", updating to " + std::to_string(rounded));
  }
  return rounded;
}

std::vector<std::string> rewrite_common_aliases(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const size_t eq = a.find('=');
    std::string name = a.substr(0, eq), rest = eq == std::string::npos ? "" : a.substr(eq);
    if (name == "--img" || name == "--img-size") name = "--imgsz";
    if (name == "--batch") name = "--batch-size";
    out.push_back(i == 0 ? a : name + rest);
  }
  return out;
}

cxxopts::ParseResult parse_app_args(cxxopts::Options& cli, int argc, const char* const* argv,
                                    const std::string& app) {
  const std::vector<std::string> args = rewrite_common_aliases(argc, argv);
  std::vector<const char*> cargs;
  for (const auto& a : args) cargs.push_back(a.c_str());
  try {
    cxxopts::ParseResult r = cli.parse(static_cast<int>(cargs.size()), cargs.data());
    if (!r.unmatched().empty()) {
      throw UsageError("unexpected argument '" + r.unmatched()[0] + "' (see " + app + " --help)");
    }
    return r;
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string(e.what()) + " (see " + app + " --help)");
  }
}

ParsedTrainArgs parse_train_args(int argc, const char* const* argv, bool reject_unimplemented) {
  const std::vector<std::string> args = normalize_argv(argc, argv);
  std::vector<const char*> cargs;
  for (const auto& a : args) cargs.push_back(a.c_str());
  cxxopts::Options cli = make_cli();
  ParsedTrainArgs out;
  try {
    auto r = cli.parse(static_cast<int>(cargs.size()), cargs.data());
    if (r.count("help")) {
      out.help = true;
      out.help_text = cli.help();
      return out;
    }
    if (r.count("version")) {
      out.version = true;
      return out;
    }
    if (!r.unmatched().empty()) {
      throw UsageError("unexpected argument '" + r.unmatched()[0] + "' (see train --help)");
    }
    Options& o = out.opt;
    for (const auto& kv : r.arguments()) o.given.push_back(kv.key());
    o.weights = r["weights"].as<std::string>();
    o.cfg = r["cfg"].as<std::string>();
    o.data = r["data"].as<std::string>();
    o.hyp = r["hyp"].as<std::string>();
    o.epochs = to_int(r, "epochs");
    o.batch_size = to_int(r, "batch-size");
    o.imgsz = to_int(r, "imgsz");
    o.rect = r["rect"].as<bool>();
    if (r.count("resume")) {
      o.resume = true;
      o.resume_path = r["resume"].as<std::string>();
    }
    o.nosave = r["nosave"].as<bool>();
    o.noval = r["noval"].as<bool>();
    o.noautoanchor = r["noautoanchor"].as<bool>();
    o.noplots = r["noplots"].as<bool>();
    if (r.count("evolve")) o.evolve = to_int(r, "evolve");
    if (r.count("cache")) o.cache = r["cache"].as<std::string>();
    o.image_weights = r["image-weights"].as<bool>();
    o.device = r["device"].as<std::string>();
    o.multi_scale = r["multi-scale"].as<bool>();
    o.single_cls = r["single-cls"].as<bool>();
    o.optimizer = r["optimizer"].as<std::string>();
    o.sync_bn = r["sync-bn"].as<bool>();
    o.workers = to_int(r, "workers");
    o.project = r["project"].as<std::string>();
    o.name = r["name"].as<std::string>();
    o.exist_ok = r["exist-ok"].as<bool>();
    o.quad = r["quad"].as<bool>();
    o.cos_lr = r["cos-lr"].as<bool>();
    o.deterministic = r["deterministic"].as<bool>();
    o.label_smoothing = to_double(r, "label-smoothing");
    o.patience = to_int(r, "patience");
    o.freeze.clear();
    for (const auto& f : r["freeze"].as<std::vector<std::string>>()) {
      o.freeze.push_back(parse_int("freeze", f));
    }
    o.save_period = to_int(r, "save-period");
    o.seed = to_int(r, "seed");
    o.local_rank = to_int(r, "local_rank");
    o.dist_backend = r["dist-backend"].as<std::string>();
    o.dist_timeout = to_int(r, "dist-timeout");
    if (r.count("nproc-per-node")) {
      o.nproc_per_node = parse_nproc(r["nproc-per-node"].as<std::string>());
    }
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string(e.what()) + " (see train --help)");
  }
  for (const auto& flag : out.opt.given) {
    if (reject_unimplemented && kNotImplementedYet.count(flag)) {
      throw UsageError("--" + flag + " is not implemented yet in this build; remove it");
    }
  }
  validate_options(out.opt);
  if (out.opt.nproc_per_node != 0) {
    // The workers run without the flag; one that still sees LOCAL_RANK was started by torchrun.
    if (const char* lr = std::getenv("LOCAL_RANK")) {
      throw UsageError("--nproc-per-node: LOCAL_RANK=" + std::string(lr) +
                       " is set, so this process was started by torchrun (or another launcher); "
                       "use either torchrun or --nproc-per-node, not both");
    }
  }
  return out;
}

void validate_options(const Options& o) {
  auto bad = [](const std::string& flag, const std::string& what) {
    throw UsageError("--" + flag + ": " + what);
  };
  if (o.epochs < 1) bad("epochs", "must be >= 1 (got " + std::to_string(o.epochs) + ")");
  if (o.batch_size == -1) bad("batch-size", "-1 (AutoBatch) is not supported; give a batch size");
  if (o.batch_size < 1)
    bad("batch-size", "must be >= 1 (got " + std::to_string(o.batch_size) + ")");
  if (o.imgsz < 1 || o.imgsz > 8192) {
    bad("imgsz", "must be between 1 and 8192 pixels (got " + std::to_string(o.imgsz) + ")");
  }
  if (o.optimizer != "SGD" && o.optimizer != "Adam" && o.optimizer != "AdamW") {
    bad("optimizer", "unknown optimizer '" + o.optimizer + "'; choose SGD, Adam or AdamW");
  }
  if (!o.cache.empty() && o.cache != "ram" && o.cache != "disk") {
    bad("cache", "must be 'ram' or 'disk' (got '" + o.cache + "')");
  }
  if (o.workers < 0) bad("workers", "must be >= 0 (got " + std::to_string(o.workers) + ")");
  if (!(o.label_smoothing >= 0.0 && o.label_smoothing < 1.0)) {
    bad("label-smoothing", "must be in [0, 1)");
  }
  if (o.patience < 0) bad("patience", "must be >= 0 (0 disables early stopping)");
  for (int f : o.freeze) {
    if (f < 0) bad("freeze", "layer indices must be >= 0 (got " + std::to_string(f) + ")");
  }
  if (o.evolve < 0) bad("evolve", "generations must be >= 1");
  if (!o.dist_backend.empty() && o.dist_backend != "nccl" && o.dist_backend != "gloo") {
    bad("dist-backend", "must be 'nccl' or 'gloo' (got '" + o.dist_backend + "')");
  }
  if (o.dist_timeout < 0) bad("dist-timeout", "must be >= 0 seconds");
  if (o.nproc_per_node != 0) {
    if (o.nproc_per_node != -1 && o.nproc_per_node < 2) {
      bad("nproc-per-node", "must be 'auto' or a number of processes >= 2 (got " +
                                std::to_string(o.nproc_per_node) +
                                "); to train in one process leave the flag out");
    }
    if (o.evolve > 0) {
      bad("nproc-per-node",
          "cannot be used with --evolve (evolution trains one process at a time)");
    }
    if (o.local_rank != -1) {
      bad("nproc-per-node",
          "cannot be used with --local_rank (the launcher sets each worker's rank)");
    }
  }
  if (o.project.empty()) bad("project", "must not be empty");
  if (o.name.empty() || o.name.find('/') != std::string::npos) {
    bad("name", "must be a non-empty folder name without '/'");
  }
}

void resolve_option_files(Options& o) {
  if (o.cfg.empty() && !o.weights.empty()) {
    // A weights file holds tensors only; its stem names the architecture (yolov5s.pt -> yolov5s).
    const std::string stem = std::filesystem::path(o.weights).stem().string();
    try {
      o.cfg = resolve_config(stem + ".yaml", ConfigKind::kModel, "--cfg");
    } catch (const UsageError&) {
      throw UsageError(
          "--cfg: required with --weights " + o.weights +
          " (weights hold tensors only; pass the model YAML, e.g. --cfg yolov5s.yaml)");
    }
  }
  if (o.cfg.empty()) o.cfg = "yolov5s.yaml";
  o.cfg = resolve_config(o.cfg, ConfigKind::kModel, "--cfg");
  o.data = resolve_config(o.data, ConfigKind::kData, "--data");
  o.hyp = resolve_config(o.hyp, ConfigKind::kHyp, "--hyp");
  std::error_code ec;
  if (!o.weights.empty() && !std::filesystem::is_regular_file(o.weights, ec)) {
    throw UsageError("--weights: file '" + o.weights +
                     "' not found; this trainer does not download weights (convert a YOLOv5 .pt "
                     "with scripts/export_yolov5_weights.py, or pass --weights '' to start from "
                     "scratch)");
  }
}

YAML::Node options_to_yaml(const Options& o) {
  YAML::Node n;
  n["weights"] = o.weights;
  n["cfg"] = o.cfg;
  n["data"] = o.data;
  n["hyp"] = o.hyp;
  n["epochs"] = o.epochs;
  n["batch_size"] = o.batch_size;
  n["imgsz"] = o.imgsz;
  n["rect"] = o.rect;
  if (o.resume) {
    n["resume"] = o.resume_path.empty() ? YAML::Node(true) : YAML::Node(o.resume_path);
  } else {
    n["resume"] = false;
  }
  n["nosave"] = o.nosave;
  n["noval"] = o.noval;
  n["noautoanchor"] = o.noautoanchor;
  n["noplots"] = o.noplots;
  n["evolve"] = o.evolve > 0 ? YAML::Node(o.evolve) : YAML::Node(YAML::NodeType::Null);
  n["cache"] = o.cache.empty() ? YAML::Node(YAML::NodeType::Null) : YAML::Node(o.cache);
  n["image_weights"] = o.image_weights;
  n["device"] = o.device;
  n["multi_scale"] = o.multi_scale;
  n["single_cls"] = o.single_cls;
  n["optimizer"] = o.optimizer;
  n["sync_bn"] = o.sync_bn;
  n["workers"] = o.workers;
  n["project"] = o.project;
  n["name"] = o.name;
  n["exist_ok"] = o.exist_ok;
  n["quad"] = o.quad;
  n["cos_lr"] = o.cos_lr;
  n["label_smoothing"] = yaml_number(o.label_smoothing);
  n["patience"] = o.patience;
  n["freeze"] = o.freeze;
  n["save_period"] = o.save_period;
  n["seed"] = o.seed;
  n["deterministic"] = o.deterministic;
  n["local_rank"] = o.local_rank;
  n["dist_backend"] = o.dist_backend;
  n["dist_timeout"] = o.dist_timeout;
  n["save_dir"] = o.save_dir;
  return n;
}

namespace {
template <typename T>
void read_key(const YAML::Node& n, const char* key, T& dst, const std::string& ctx) {
  const YAML::Node v = n[key];
  if (!v || v.IsNull()) return;  // keep the default; older or YOLOv5-written files may lack keys
  try {
    dst = v.as<T>();
  } catch (const YAML::Exception&) {
    throw std::runtime_error(ctx + ":" + std::to_string(v.Mark().line + 1) + ": key '" + key +
                             "' has the wrong type");
  }
}
}  // namespace

Options options_from_yaml(const YAML::Node& n, const std::string& ctx) {
  if (!n.IsMap()) throw std::runtime_error(ctx + ": expected a mapping of option names to values");
  Options o;
  read_key(n, "weights", o.weights, ctx);
  read_key(n, "cfg", o.cfg, ctx);
  read_key(n, "data", o.data, ctx);
  read_key(n, "hyp", o.hyp, ctx);
  if (n["hyp"] && n["hyp"].IsMap()) o.hyp.clear();  // YOLOv5 inlines the hyp dict here
  read_key(n, "epochs", o.epochs, ctx);
  read_key(n, "batch_size", o.batch_size, ctx);
  read_key(n, "imgsz", o.imgsz, ctx);
  read_key(n, "rect", o.rect, ctx);
  if (const YAML::Node r = n["resume"]; r && !r.IsNull()) {
    bool flag = false;
    if (YAML::convert<bool>::decode(r, flag)) {
      o.resume = flag;
    } else {
      o.resume = true;
      o.resume_path = r.as<std::string>();
    }
  }
  read_key(n, "nosave", o.nosave, ctx);
  read_key(n, "noval", o.noval, ctx);
  read_key(n, "noautoanchor", o.noautoanchor, ctx);
  read_key(n, "noplots", o.noplots, ctx);
  read_key(n, "evolve", o.evolve, ctx);
  read_key(n, "cache", o.cache, ctx);
  read_key(n, "image_weights", o.image_weights, ctx);
  read_key(n, "device", o.device, ctx);
  read_key(n, "multi_scale", o.multi_scale, ctx);
  read_key(n, "single_cls", o.single_cls, ctx);
  read_key(n, "optimizer", o.optimizer, ctx);
  read_key(n, "sync_bn", o.sync_bn, ctx);
  read_key(n, "workers", o.workers, ctx);
  read_key(n, "project", o.project, ctx);
  read_key(n, "name", o.name, ctx);
  read_key(n, "exist_ok", o.exist_ok, ctx);
  read_key(n, "quad", o.quad, ctx);
  read_key(n, "cos_lr", o.cos_lr, ctx);
  read_key(n, "label_smoothing", o.label_smoothing, ctx);
  read_key(n, "patience", o.patience, ctx);
  read_key(n, "freeze", o.freeze, ctx);
  read_key(n, "save_period", o.save_period, ctx);
  read_key(n, "seed", o.seed, ctx);
  read_key(n, "deterministic", o.deterministic, ctx);
  read_key(n, "local_rank", o.local_rank, ctx);
  read_key(n, "dist_backend", o.dist_backend, ctx);
  read_key(n, "dist_timeout", o.dist_timeout, ctx);
  read_key(n, "save_dir", o.save_dir, ctx);
  return o;
}

void save_options(const Options& opt, const std::string& path) {
  save_yaml_file(options_to_yaml(opt), path);
}

Options load_options(const std::string& path) {
  return options_from_yaml(load_yaml_file(path), path);
}

}  // namespace yolo

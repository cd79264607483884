#include "utils/engine/train_config.h"

#include <filesystem>

#include "models/model_config.h"
#include "models/weights_hub.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/yaml_io.h"
#include "utils/engine/train_rules.h"
#include "utils/eval/model_family.h"

namespace fs = std::filesystem;

namespace yolo {

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

namespace {

// --resume from `ckpt`: the run's own options (opt.yaml beside weights/), with the flags that may
// differ between machines taken from the command line. Which flags the command line may give is
// a rule (train_rules.cpp).
Options merge_resume(const Options& cli, std::string ckpt) {
  std::error_code ec;
  if (fs::is_directory(ckpt, ec)) {
    // A run folder (or its weights/ folder) stands for the last.pt inside it.
    for (const char* inner : {"weights/last.pt", "last.pt"}) {
      if (fs::is_regular_file(fs::path(ckpt) / inner, ec)) {
        ckpt = (fs::path(ckpt) / inner).string();
        break;
      }
    }
    if (fs::is_directory(ckpt, ec)) {
      throw UsageError("--resume: '" + ckpt +
                       "' is a folder with no weights/last.pt (the run saved no checkpoint, or "
                       "it is not a run folder); pass a run's last.pt, or --resume alone for the "
                       "newest run under runs/train");
    }
  }
  if (const std::string why = file_problem(ckpt); !why.empty()) {
    throw UsageError("--resume: checkpoint '" + ckpt + "' " + why);
  }
  if (is_yolov5_checkpoint(ckpt)) {
    throw UsageError("--resume: " + ckpt +
                     " is a YOLOv5 checkpoint; its optimizer state is Python's (PyTorch's "
                     "optimizer and YOLOv5's own opt), which this trainer cannot continue. Start "
                     "a new run from its weights instead: --weights " +
                     shell_word(ckpt) + " (the epochs start over)");
  }
  const fs::path run_dir = fs::absolute(ckpt).parent_path().parent_path();
  const fs::path opt_yaml = run_dir / "opt.yaml";
  if (!fs::is_regular_file(opt_yaml, ec)) {
    throw UsageError("--resume: " + opt_yaml.string() + " not found; " + ckpt +
                     " must sit in a run dir's weights/ folder");
  }
  if (fs::exists(run_dir / "hyp_generation.yaml", ec)) {
    // A generation of --evolve trains in the evolution's folder: resumed alone it would be a
    // plain run, and the evolution would not go on.
    throw UsageError("--resume: " + ckpt + " is a generation of hyperparameter evolution in " +
                     run_dir.string() +
                     "; continue the evolution instead with the command that started it and "
                     "--evolve N --project " +
                     shell_word(run_dir.parent_path().string()) + " --name " +
                     shell_word(run_dir.filename().string()) +
                     " --exist-ok (evolve.csv keeps the generations done)");
  }
  Options o = load_options(opt_yaml.string());
  o.resume = true;
  o.resume_path = ckpt;
  o.save_dir = run_dir.string();
  o.given = cli.given;
  for (const auto& flag : cli.given) {
    if (flag == "device") o.device = cli.device;
    if (flag == "workers") o.workers = cli.workers;
    if (flag == "memory-format") o.memory_format = cli.memory_format;
    if (flag == "augment-device") o.augment_device = cli.augment_device;
    if (flag == "local_rank") o.local_rank = cli.local_rank;
    if (flag == "dist-backend") o.dist_backend = cli.dist_backend;
    if (flag == "dist-timeout") o.dist_timeout = cli.dist_timeout;
  }
  o.nproc_per_node = cli.nproc_per_node;
  o.cache_dir = cli.cache_dir;
  const fs::path hyp_copy = run_dir / "hyp.yaml";
  if (fs::is_regular_file(hyp_copy, ec)) o.hyp = hyp_copy.string();  // the run's own copy
  return o;
}

}  // namespace

namespace {
// Without --hyp and --optimizer a model family's own defaults (hyp.anchor-free.yaml and auto for
// YOLOv8 and YOLO11); a resumed run keeps what its opt.yaml names.
void choose_family_hyp(Options& opt, const std::string& model_yaml) {
  if (opt.resume || (model_yaml.empty() && opt.cfg.empty())) return;
  if (opt.was_given("hyp") && opt.was_given("optimizer") && opt.was_given("close-mosaic")) return;
  const ModelSpec spec = model_yaml.empty() ? parse_model_spec_file(opt.cfg)
                                            : parse_model_spec_string(model_yaml, opt.weights);
  if (!opt.was_given("optimizer")) opt.optimizer = model_family(spec).default_optimizer;
  if (!opt.was_given("close-mosaic")) opt.close_mosaic = model_family(spec).close_mosaic;
  if (opt.was_given("hyp")) return;
  const std::string& hyp = model_family(spec).default_hyp;
  if (fs::path(opt.hyp).filename() == hyp) return;
  opt.hyp = resolve_config(hyp, ConfigKind::kHyp, "--hyp");
  log_info("hyperparameters: " + hyp + ", the defaults of " + model_family(spec).name +
           " models (--hyp names others)");
}
}  // namespace

TrainConfig TrainConfig::build(const Options& command_line, Options opt, bool restart) {
  TrainConfig c;
  c.cli_ = command_line;
  // A resumed run's paths come from its opt.yaml: errors name that file and key, not a flag the
  // user did not give.
  const std::string opt_yaml = (fs::path(opt.save_dir) / "opt.yaml").string();
  auto source = [&](const char* key, const char* flag) {
    return opt.resume ? opt_yaml + ": key '" + key + "'" : std::string(flag);
  };
  // With --weights and no --cfg the weights name the architecture (read below).
  if (opt.cfg.empty() && opt.weights.empty()) opt.cfg = "yolov5s.yaml";
  try {
    if (!opt.cfg.empty()) {
      try {
        opt.cfg = resolve_config(opt.cfg, ConfigKind::kModel, source("cfg", "--cfg"));
      } catch (const UsageError&) {
        // A resumed checkpoint that carries its model YAML needs no file (set-up says so).
        if (!opt.resume || read_weights_file(opt.resume_path).model_yaml.empty()) throw;
      }
    }
    opt.data = resolve_config(opt.data, ConfigKind::kData, source("data", "--data"));
    opt.hyp = resolve_config(opt.hyp, ConfigKind::kHyp, source("hyp", "--hyp"));
  } catch (const UsageError& e) {
    if (!opt.resume) throw;
    throw std::runtime_error(e.what());  // a bad file (exit 1), not a bad flag
  }
  if (opt.evolve > 0 && !opt.was_given("project")) opt.project = "runs/evolve";
  c.opt_ = std::move(opt);
  // Rules first: a broken one is cheaper to report than reading the weights.
  if (!restart) validate(c);
  const Options& o = c.opt_;
  if (o.resume || o.weights.empty()) {
    choose_family_hyp(c.opt_, "");
    return c;
  }
  c.opt_.weights = resolve_weights(o.weights);  // a released name (yolov5s.pt) is downloaded
  if (const std::string why = file_problem(o.weights); !why.empty()) {
    throw UsageError("--weights: '" + o.weights + "' " + why +
                     (why == "not found" ? "; pass a .pt file (ours, YOLOv5's or Ultralytics'), a "
                                           "released name such as yolov5s.pt or yolo11n.pt "
                                           "(downloaded), or --weights '' to start from scratch"
                                         : ""));
  }
  // Recorded absolute, as data, cfg and hyp are: opt.yaml and the checkpoints then name the same
  // file wherever val or a resume runs.
  c.opt_.weights = fs::absolute(o.weights).lexically_normal().string();
  // Without --cfg a YOLOv5 checkpoint gives the architecture; other weights name their model YAML.
  auto file = std::make_shared<WeightsFile>(read_weights_file(o.weights));
  if (o.cfg.empty()) {
    if (file->yolov5) {
      c.model_yaml_ = file->yolov5->model_yaml;
    } else if (!file->model_yaml.empty()) {
      // A checkpoint of this trainer carries its architecture: the YAML it names is used while
      // it still says the same, else the saved text (written into the run as model.yaml).
      std::string named;
      try {
        named = model_cfg_for_weights(*file, o.weights);
        if (read_model_yaml(named) != file->model_yaml) named.clear();
      } catch (const std::exception&) {
        named.clear();
      }
      if (named.empty()) {
        log_info("model: the model YAML saved in " + o.weights);
        c.model_yaml_ = file->model_yaml;
      } else {
        c.opt_.cfg = named;
      }
    } else {
      c.opt_.cfg = model_cfg_for_weights(*file, o.weights);
    }
  }
  c.weights_ = std::move(file);
  choose_family_hyp(c.opt_, c.model_yaml_);
  return c;
}

TrainConfig resolve(const Options& command_line) {
  if (!command_line.resume) return TrainConfig::build(command_line, command_line, false);
  const std::string ckpt =
      command_line.resume_path.empty() ? latest_run() : command_line.resume_path;
  return TrainConfig::build(command_line, merge_resume(command_line, ckpt), false);
}

TrainConfig resolve_restart(const Options& command_line, const std::string& last_pt) {
  return TrainConfig::build(command_line, merge_resume(command_line, last_pt), true);
}

TrainConfig TrainConfig::evolve_generation(const std::string& hyp_path,
                                           const std::string& run_dir) const {
  TrainConfig g = *this;
  Options& o = g.opt_;
  o.evolve = 0;
  o.noval = o.nosave = o.noplots = true;
  o.hyp = hyp_path;
  o.project = fs::path(run_dir).parent_path().string();
  o.name = fs::path(run_dir).filename().string();
  o.exist_ok = true;
  return g;
}

}  // namespace yolo

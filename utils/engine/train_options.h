#pragma once
// The one struct that holds every `train` flag (YOLOv5 v7.0 train.py names and defaults, plus
// --dist-backend/--dist-timeout). It round-trips through opt.yaml so --resume can restore a run.
// The initializers below are the flags' defaults; train_options.cpp's flag table binds each member
// to its flag, --help line, check and opt.yaml key.
#include <string>
#include <vector>

#include "utils/core/cli.h"

namespace yolo {

struct Options {
  std::string weights;  // YOLOv5 defaults to yolov5s.pt (downloaded); we start from scratch.
  std::string cfg;      // model YAML; empty with empty weights means yolov5s.yaml
  std::string data = "shapes.yaml";  // the project's generated default data
  std::string hyp = "hyp.scratch-low.yaml";
  std::vector<std::string> hyp_set;  // key=value over the hyp file's values
  int epochs = 100;
  int batch_size = 16;  // total over all ranks
  int imgsz = 640;
  bool rect = false;
  bool resume = false;
  std::string resume_path;  // empty with resume=true: the latest last.pt under runs/
  bool nosave = false;
  bool noval = false;
  bool noautoanchor = false;
  bool noplots = false;
  int evolve = 0;     // generations; 0 = off, bare --evolve = 300
  std::string cache;  // "", "ram" or "disk"
  bool image_weights = false;
  std::string device;
  bool multi_scale = false;
  bool single_cls = false;
  std::string optimizer = "SGD";
  bool sync_bn = false;
  int workers = 8;
  std::string project = "runs/train";
  std::string name = "exp";
  bool exist_ok = false;
  bool quad = false;
  // Ultralytics' close_mosaic: the last N epochs train without mosaic; -1: the model family's
  // (0 for YOLOv5's models, 10 for YOLOv8/YOLO11).
  int close_mosaic = -1;
  bool cos_lr = false;
  double label_smoothing = 0.0;
  int patience = 100;
  std::vector<int> freeze{0};
  int save_period = -1;
  int seed = 0;
  bool deterministic = false;          // deterministic cuDNN/algorithms instead of cuDNN autotuning
  std::string memory_format = "auto";  // auto (channels-last), channels-last, contiguous
  // Where training augmentation runs: cpu (OpenCV in the loader's workers) or cuda (batched
  // tensor ops on the training GPU; the workers only decode).
  std::string augment_device = "cpu";
  std::string cache_dir;  // --cache-dir (not in opt.yaml): label caches and --cache disk files
  int local_rank = -1;
  std::string dist_backend;  // "", "nccl" or "gloo"; empty picks by device
  int dist_timeout = 0;      // seconds; 0 = 60 for Gloo, 600 for NCCL
  // --nproc-per-node: 0 = no launcher, -1 = auto, else N >= 2 workers. Not in opt.yaml: the
  // workers run without it, and a run may be resumed with or without the launcher.
  int nproc_per_node = 0;
  std::string save_dir;   // set once the run dir is chosen
  std::string args_yaml;  // the yolo command's keys, written as the run's args.yaml

  // Flags the user gave explicitly on the command line (names without dashes).
  std::vector<std::string> given;
  bool was_given(const std::string& flag) const;
};

// train's command line as given: the options (defaults where not given) or --help/--version.
struct CommandLine {
  Options opt;
  bool help = false;
  bool version = false;  // --version: print version_report() and exit 0
  std::string help_text;
};

using Flag = cli::Flag<Options>;

// Parses train's argv: syntax and each flag's own value (argparse's types and choices). Throws
// UsageError naming the flag on unknown flags, malformed or out-of-range values. Touches no file
// and reads no environment: rules across flags and the environment are validate's
// (train_rules.h), once the options are resolved (train_config.h).
CommandLine parse_train_args(int argc, const char* const* argv);

// The first value no flag accepts, as "--flag: what is wrong", or "" (the table's checks, also
// run on options read from a run's opt.yaml).
std::string bad_option_value(const Options& opt);

std::string train_help();

// opt.yaml (YOLOv5's key names, e.g. batch_size, sync_bn).
YAML::Node options_to_yaml(const Options& opt);
Options options_from_yaml(const YAML::Node& node, const std::string& context);
void save_options(const Options& opt, const std::string& path);
Options load_options(const std::string& path);

}  // namespace yolo

#include "utils/command/yolo_command.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "utils/core/app_main.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/distributed/ddp_setup.h"
#include "utils/engine/train_main.h"
#include "utils/eval/detect_main.h"
#include "utils/eval/val_main.h"
#include "utils/export/export_main.h"

namespace yolo {

namespace {

// How a key's value becomes flag words.
enum class Form {
  kValue,    // key=v -> --flag v
  kSwitch,   // key=True -> --flag; key=False -> nothing
  kInverse,  // key=False -> --flag (val=False -> --noval); key=True -> nothing
  kList,     // key=[a,b] or a,b -> --flag a b
  kModel,    // model=X.yaml -> --cfg (train); anything else -> --weights
  kResume,   // resume=True -> --resume; resume=path -> --resume path
  kCache,    // cache=True|ram|disk -> --cache ram|disk; False -> nothing
  kFormat,   // format=torchscript|onnx -> --include
  kSplit,    // split=val|test -> --task
  kBatch,    // batch=-1 (AutoBatch) or N
};

struct Key {
  const char* name;
  const char* modes;  // t(rain) v(al) p(redict) e(xport)
  const char* flag;   // without dashes
  Form form;
  const char* help;
};

// Every key `yolo` takes, in Ultralytics' default.yaml order. One row each: its flag in the
// programs' own tables, so no option is declared twice.
const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      {"model", "tvpe", "weights", Form::kModel,
       "weights (.pt, .torchscript, .onnx, or a released name such as yolo11n.pt), or a model "
       "YAML to train from scratch"},
      {"data", "tve", "data", Form::kValue, "dataset YAML (bare names from configs/data)"},
      {"epochs", "t", "epochs", Form::kValue, "epochs to train"},
      {"patience", "t", "patience", Form::kValue, "epochs without improvement before stopping"},
      {"batch", "tvpe", "batch-size", Form::kBatch, "batch size (-1: AutoBatch on one GPU)"},
      {"imgsz", "tvpe", "imgsz", Form::kList, "image size (predict, export: also h,w)"},
      {"save_period", "t", "save-period", Form::kValue, "save a checkpoint every N epochs"},
      {"cache", "t", "cache", Form::kCache, "cache images: True/ram or disk"},
      {"device", "tvpe", "device", Form::kValue, "cpu, 0, or 0,1,2,3"},
      {"workers", "tv", "workers", Form::kValue, "loader workers (per rank)"},
      {"project", "tvp", "project", Form::kValue, "runs folder (default runs/detect)"},
      {"name", "tvp", "name", Form::kValue, "run folder inside project (train, val, predict)"},
      {"exist_ok", "tvp", "exist-ok", Form::kSwitch, "reuse project/name"},
      {"optimizer", "t", "optimizer", Form::kValue, "SGD, Adam, AdamW, MuSGD or auto (default)"},
      {"seed", "t", "seed", Form::kValue, "random seed"},
      {"deterministic", "t", "deterministic", Form::kSwitch, "deterministic algorithms"},
      {"single_cls", "tv", "single-cls", Form::kSwitch, "train or validate as one class"},
      {"rect", "t", "rect", Form::kSwitch, "rectangular training batches"},
      {"cos_lr", "t", "cos-lr", Form::kSwitch, "cosine learning-rate schedule"},
      {"close_mosaic", "t", "close-mosaic", Form::kValue, "last N epochs without mosaic"},
      {"resume", "t", "resume", Form::kResume, "True (the latest run) or a last.pt"},
      {"freeze", "t", "freeze", Form::kList, "freeze the first N layers, or the layers listed"},
      {"val", "t", "noval", Form::kInverse, "False: validate only after the last epoch"},
      {"split", "v", "task", Form::kSplit, "val or test"},
      {"save_json", "v", "save-json", Form::kSwitch, "COCO JSON results"},
      {"verbose", "v", "verbose", Form::kSwitch, "metrics per class"},
      {"conf", "vp", "conf-thres", Form::kValue, "confidence threshold"},
      {"iou", "vp", "iou-thres", Form::kValue, "NMS IoU threshold"},
      {"max_det", "vp", "max-det", Form::kValue, "detections per image"},
      {"half", "vpe", "half", Form::kSwitch, "float16 (CUDA)"},
      {"plots", "tv", "noplots", Form::kInverse, "False: no plots"},
      {"end2end", "vpe", "end2end", Form::kSwitch, "YOLO26: the one-to-one head, no NMS"},
      {"source", "p", "source", Form::kValue, "images, videos, folders, streams"},
      {"vid_stride", "p", "vid-stride", Form::kValue, "every Nth video frame"},
      {"stream_buffer", "p", "stream-buffer", Form::kSwitch, "every stream frame in order"},
      {"augment", "vp", "augment", Form::kSwitch, "test-time augmentation"},
      {"agnostic_nms", "p", "agnostic-nms", Form::kSwitch, "class-agnostic NMS"},
      {"classes", "p", "classes", Form::kList, "only these class ids"},
      {"save", "p", "nosave", Form::kInverse, "False: save no images"},
      {"save_txt", "vp", "save-txt", Form::kSwitch, "labels as .txt"},
      {"save_conf", "vp", "save-conf", Form::kSwitch, "confidences in the .txt labels"},
      {"save_crop", "p", "save-crop", Form::kSwitch, "crops of the boxes"},
      {"show_labels", "p", "hide-labels", Form::kInverse, "False: boxes without labels"},
      {"show_conf", "p", "hide-conf", Form::kInverse, "False: labels without confidences"},
      {"line_width", "p", "line-thickness", Form::kValue, "box line width in pixels"},
      {"format", "e", "include", Form::kFormat, "torchscript (default) or onnx"},
      {"dynamic", "e", "dynamic", Form::kSwitch, "dynamic batch and image size"},
      {"opset", "e", "opset", Form::kValue, "ONNX opset"},
      {"hyp", "t", "hyp", Form::kValue, "hyperparameters YAML (this trainer's; hyp/)"},
  };
  return table;
}

// "[640, 480]", "640,480" or "640 480" -> {"640", "480"}.
std::vector<std::string> list_words(const std::string& v) {
  std::string s;
  for (char c : v) s += (c == '[' || c == ']' || c == '(' || c == ')' || c == ',') ? ' ' : c;
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Ultralytics' other settings: known, so that they are refused by name rather than as typos.
const std::vector<std::string>& unsupported_keys() {
  static const std::vector<std::string> names = list_words(
      "time pretrained amp fraction profile multi_scale compile overlap_mask mask_ratio dropout "
      "dnn visualize retina_masks embed show save_frames show_boxes keras optimize int8 simplify "
      "workspace nms cls_pw pose kobj rle angle nbs bgr cutmix copy_paste_mode auto_augment "
      "erasing cfg tracker task mode channels_last cls_remap dgrad dis distill_model dlam dlog "
      "quantize");
  return names;
}

// Ultralytics' hyperparameter keys this trainer's hyp files have (train's --hyp-set).
const std::vector<std::string>& hyperparameters() {
  static const std::vector<std::string> names = list_words(
      "lr0 lrf momentum weight_decay warmup_epochs warmup_momentum warmup_bias_lr box cls dfl "
      "hsv_h hsv_s hsv_v degrees translate scale shear perspective flipud fliplr mosaic mixup "
      "copy_paste");
  return names;
}

bool is_hyperparameter(const std::string& k) {
  return std::find(hyperparameters().begin(), hyperparameters().end(), k) !=
         hyperparameters().end();
}

const std::vector<std::pair<std::string, char>>& modes() {
  static const std::vector<std::pair<std::string, char>> m = {
      {"train", 't'}, {"val", 'v'}, {"predict", 'p'}, {"export", 'e'}};
  return m;
}

char mode_letter(const std::string& mode) {
  for (const auto& [name, letter] : modes()) {
    if (name == mode) return letter;
  }
  return 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Ultralytics' booleans: True/False in any case; a key given alone is True.
bool truth(const std::string& key, const std::string& v) {
  const std::string l = lower(v);
  if (l == "true" || l == "1") return true;
  if (l == "false" || l == "0") return false;
  throw UsageError(key + "=" + v + ": must be True or False");
}

std::string modes_text(const char* letters) {
  std::string out;
  for (const auto& [name, letter] : modes()) {
    if (std::string(letters).find(letter) == std::string::npos) continue;
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

const Key* find_key(const std::string& name) {
  for (const Key& k : keys()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

[[noreturn]] void refuse_key(const std::string& key, const std::string& mode) {
  if (key.empty()) throw UsageError("a key=value word needs a key before '=' (e.g. epochs=10)");
  if (is_hyperparameter(key)) {
    if (mode == "train") throw UsageError(key + ": give a value (" + key + "=0.01)");
    throw UsageError(key + ": applies to yolo train, not " + mode);
  }
  if (std::find(unsupported_keys().begin(), unsupported_keys().end(), key) !=
      unsupported_keys().end()) {
    throw UsageError(key + ": an Ultralytics setting this trainer does not support (see yolo " +
                     "help for the keys it takes)");
  }
  std::vector<std::string> known = hyperparameters();
  for (const Key& k : keys()) known.push_back(k.name);
  for (const std::string& k : unsupported_keys()) known.push_back(k);
  const std::vector<std::string> near = close_words(key, known);
  throw UsageError("unknown key '" + key + "' for yolo " + mode +
                   (near.empty() ? "" : "; did you mean " + quoted_choices(near) + "?") +
                   " (see yolo help)");
}

// key=value -> words appended to argv.
void add_key(const Key& k, const std::string& value, const std::string& mode,
             std::vector<std::string>& argv) {
  const std::string flag = std::string("--") + k.flag;
  const std::string key = k.name;
  switch (k.form) {
    case Form::kValue:
      argv.insert(argv.end(), {flag, value});
      return;
    case Form::kSwitch:
      if (truth(key, value)) argv.push_back(flag);
      return;
    case Form::kInverse:
      if (!truth(key, value)) argv.push_back(flag);
      return;
    case Form::kList: {
      const std::vector<std::string> words = list_words(value);
      if (words.empty()) throw UsageError(key + "=" + value + ": give a value or a list [a,b]");
      if (key == "imgsz" && words.size() > 1 && (mode == "train" || mode == "val")) {
        throw UsageError("imgsz=" + value + ": " + mode +
                         " takes one size (square images, as Ultralytics' " + mode + ")");
      }
      argv.push_back(flag);
      argv.insert(argv.end(), words.begin(), words.end());
      return;
    }
    case Form::kModel: {
      const bool yaml = value.size() > 5 && (value.compare(value.size() - 5, 5, ".yaml") == 0 ||
                                             value.compare(value.size() - 4, 4, ".yml") == 0);
      if (yaml && mode != "train") {
        throw UsageError("model=" + value + ": " + mode +
                         " needs trained weights (a .pt, .torchscript or .onnx file), not a "
                         "model YAML");
      }
      argv.insert(argv.end(), {yaml ? "--cfg" : "--weights", value});
      return;
    }
    case Form::kResume: {
      const std::string l = lower(value);
      if (l == "false" || l == "0") return;
      argv.push_back(flag);
      if (l != "true" && l != "1") argv.push_back(value);
      return;
    }
    case Form::kCache: {
      const std::string l = lower(value);
      if (l == "false" || l == "0") return;
      if (l != "true" && l != "1" && l != "ram" && l != "disk") {
        throw UsageError("cache=" + value + ": must be True, ram, disk or False");
      }
      argv.insert(argv.end(), {flag, l == "disk" ? "disk" : "ram"});
      return;
    }
    case Form::kFormat: {
      const std::string l = lower(value);
      if (l != "torchscript" && l != "onnx") {
        throw UsageError("format=" + value +
                         ": this trainer exports torchscript and onnx (not Ultralytics' other "
                         "formats)");
      }
      argv.insert(argv.end(), {flag, l});
      return;
    }
    case Form::kSplit: {
      if (value != "val" && value != "test") {
        throw UsageError("split=" + value + ": val or test");
      }
      argv.insert(argv.end(), {flag, value});
      return;
    }
    case Form::kBatch: {
      if (value.find('.') != std::string::npos) {
        throw UsageError("batch=" + value +
                         ": a fraction of GPU memory is not supported; give a batch size, or -1 "
                         "for AutoBatch");
      }
      argv.insert(argv.end(), {flag, value});
      return;
    }
  }
}

std::string program_of(const std::string& mode) { return mode == "predict" ? "detect" : mode; }

}  // namespace

namespace {

// The mode at args[i] (after an optional `detect`), "help" or "version"; i is left on it.
std::string read_mode(const std::vector<std::string>& args, size_t& i) {
  static const std::vector<std::string> tasks = {"segment", "classify", "pose", "obb"};
  if (i < args.size() && args[i] == "detect") ++i;
  if (i < args.size() && std::find(tasks.begin(), tasks.end(), args[i]) != tasks.end()) {
    throw UsageError("task '" + args[i] + "': this trainer detects objects only (yolo detect " +
                     "MODE ...); segment, classify, pose and obb are not supported");
  }
  if (i >= args.size() || args[i] == "help" || args[i] == "-h" || args[i] == "--help") {
    return "help";
  }
  if (args[i] == "version" || args[i] == "--version") return "version";
  const std::string& mode = args[i];
  if (mode_letter(mode)) return mode;
  if (mode.find('=') != std::string::npos) {
    throw UsageError("yolo needs a mode before '" + mode + "': yolo train|val|predict|export " +
                     "key=value ...");
  }
  const std::string best = closest_word(
      mode, {"train", "val", "predict", "export", "help", "version", "track", "benchmark"});
  const bool other = mode == "track" || mode == "benchmark" || mode == "checks" ||
                     mode == "settings" || mode == "solutions";
  throw UsageError("mode '" + mode + "'" +
                   (other          ? " is not supported"
                    : best.empty() ? " is unknown"
                                   : " is unknown; did you mean '" + best + "'?") +
                   "; modes: train, val, predict, export (and help, version)");
}

using Given = std::vector<std::pair<const Key*, std::string>>;

// As Ultralytics' merge_equals_args: `epochs = 1`, `epochs= 1` and `epochs =1` are epochs=1 (the
// words from `first` on).
std::vector<std::string> join_equals(const std::vector<std::string>& args, size_t first) {
  std::vector<std::string> out;
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool next = i + 1 < args.size();
    if (a == "=" && !out.empty() && next) {
      out.back() += "=" + args[++i];
    } else if (a.size() > 1 && a.back() == '=' && a.find('=') == a.size() - 1 && next &&
               args[i + 1].find('=') == std::string::npos) {
      out.push_back(a + args[++i]);
    } else if (a.size() > 1 && a.front() == '=' && !out.empty() &&
               out.back().find('=') == std::string::npos) {
      out.back() += a;
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// The key=value words after the mode, each checked against the table; train's hyperparameters
// (lr0=0.02) are gathered into `hyp` as train's --hyp-set words.
Given read_keys(const std::vector<std::string>& raw, size_t first, const std::string& mode,
                std::vector<std::string>& hyp) {
  const char letter = mode_letter(mode);
  const std::vector<std::string> args = join_equals(raw, first);
  Given given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) == 0) {
      throw UsageError("'" + a + "': yolo takes key=value (e.g. " + a.substr(2) +
                       "=...); build/bin/" + program_of(mode) + " takes --flags");
    }
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    const Key* k = find_key(key);
    if (!k && mode == "train" && is_hyperparameter(key) && eq != std::string::npos) {
      for (const std::string& h : hyp) {
        if (h.rfind(key + "=", 0) == 0) throw UsageError(key + ": given twice");
      }
      const std::string v = a.substr(eq + 1);
      char* end = nullptr;
      std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') throw UsageError(a + ": " + key + " must be a number");
      hyp.push_back(a);
      continue;
    }
    if (!k) refuse_key(key, mode);
    if (std::string(k->modes).find(letter) == std::string::npos) {
      throw UsageError(key + ": applies to yolo " + modes_text(k->modes) + ", not " + mode);
    }
    for (const auto& g : given) {
      if (g.first == k) throw UsageError(key + ": given twice");
    }
    const std::string value = eq == std::string::npos ? "True" : a.substr(eq + 1);
    if (value.empty()) throw UsageError(key + "=: give a value");
    given.emplace_back(k, value);
  }
  return given;
}

std::string value_of(const Given& given, const std::string& key) {
  for (const auto& g : given) {
    if (key == g.first->name) return g.second;
  }
  return "";
}

bool resumes(const Given& given) {
  const std::string r = lower(value_of(given, "resume"));
  return !r.empty() && r != "false" && r != "0";
}

// As Ultralytics: `yolo train resume model=path/to/last.pt` continues that run with its own
// settings (train refuses the keys a resume may not change).
void add_resume(const Given& given, std::vector<std::string>& argv) {
  const std::string r = lower(value_of(given, "resume"));
  const bool bare = r == "true" || r == "1";
  argv.push_back("--resume");
  if (!bare) argv.push_back(value_of(given, "resume"));
  if (bare && !value_of(given, "model").empty()) argv.push_back(value_of(given, "model"));
  for (const auto& [k, v] : given) {
    if (std::string(k->name) != "resume" && std::string(k->name) != "model") {
      add_key(*k, v, "train", argv);
    }
  }
}

}  // namespace

YoloCommand translate_yolo_command(const std::vector<std::string>& args) {
  YoloCommand out;
  size_t i = 0;
  out.mode = read_mode(args, i);
  if (out.mode == "help" || out.mode == "version") return out;
  const std::string& mode = out.mode;
  out.argv = {program_of(mode)};
  std::vector<std::string> hyp;
  const Given given = read_keys(args, i + 1, mode, hyp);
  if (mode == "train" && resumes(given)) {
    if (!hyp.empty()) {
      throw UsageError(hyp.front() +
                       ": a resumed run trains on with its own hyperparameters (the run's "
                       "hyp.yaml); drop it, or start a new run from the weights: yolo train "
                       "model=last.pt " +
                       hyp.front() + " ...");
    }
    add_resume(given, out.argv);
    return out;
  }
  for (const auto& [k, v] : given) {
    add_key(*k, v, mode, out.argv);
    if (mode == "train") out.args_yaml += std::string(k->name) + ": " + v + "\n";
  }
  if (!hyp.empty()) {
    out.argv.push_back("--hyp-set");
    for (const std::string& h : hyp) {
      out.argv.push_back(h);
      const size_t eq = h.find('=');
      out.args_yaml += h.substr(0, eq) + ": " + h.substr(eq + 1) + "\n";
    }
  }
  // Ultralytics' defaults where they differ from the programs': runs/detect/<mode> folders and
  // the optimizer chosen for the run.
  if (mode != "export") {
    if (value_of(given, "project").empty()) {
      out.argv.insert(out.argv.end(), {"--project", "runs/detect"});
    }
    if (value_of(given, "name").empty()) out.argv.insert(out.argv.end(), {"--name", mode});
  }
  if (mode == "train") {
    if (value_of(given, "optimizer").empty()) {
      out.argv.insert(out.argv.end(), {"--optimizer", "auto"});
    }
    out.args_yaml = "task: detect\nmode: train\n" + out.args_yaml;
    out.argv.insert(out.argv.end(), {"--args-yaml", out.args_yaml});
  }
  return out;
}

std::string yolo_help() {
  std::string s =
      "Usage: yolo [detect] MODE key=value ...   (Ultralytics' command syntax)\n"
      "  MODE: train, val, predict, export; also yolo help, yolo version\n"
      "  e.g. yolo train model=yolo11n.pt data=coco8.yaml epochs=3 imgsz=640\n"
      "       yolo predict model=runs/detect/train/weights/best.pt source=images/\n"
      "Each key is a flag of build/bin/train, val, detect (predict) or export:\n";
  for (const Key& k : keys()) {
    std::string row = std::string("  ") + k.name;
    row.resize(std::max<size_t>(row.size() + 1, 17), ' ');
    std::string flag = std::string("--") + k.flag;
    flag.resize(std::max<size_t>(flag.size() + 1, 18), ' ');
    std::string m = modes_text(k.modes);
    m.resize(std::max<size_t>(m.size() + 1, 29), ' ');
    s += row + flag + m + k.help + "\n";
  }
  s += "  lr0, lrf, momentum, weight_decay, warmup_*, box, cls, dfl, hsv_*, degrees, translate,\n"
       "  scale, shear, perspective, flipud, fliplr, mosaic, mixup, copy_paste: train's\n"
       "  hyperparameters (--hyp-set KEY=VALUE over the hyp file's)\n"
       "Runs go to runs/detect/train, train2, ... (val, predict likewise); train writes "
       "args.yaml there.\n";
  return s;
}

int yolo_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const YoloCommand c = translate_yolo_command(args);
  if (c.mode == "help") {
    std::cout << yolo_help();
    return 0;
  }
  if (c.mode == "version") {
    std::cout << version_report();
    return 0;
  }
  std::vector<char*> words;
  for (const std::string& w : c.argv) words.push_back(const_cast<char*>(w.c_str()));
  words.push_back(nullptr);
  const int n = static_cast<int>(c.argv.size());
  if (c.mode == "train") return train_main(n, words.data());
  if (c.mode == "val") {
    const DistContext ranks = start_distributed_eval();  // under torchrun: the ranks share it
    return val_main(n, words.data(),
                    {ranks.exchange(), std::max(ranks.env().local_rank, 0),
                     std::max(ranks.env().local_world_size, 1)});
  }
  if (c.mode == "predict") return detect_main(n, words.data());
  return export_main(n, words.data());
}

}  // namespace yolo

#include "utils/core/options.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

#include "utils/core/errors.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/yaml_io.h"

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

int parse_int(const std::string& flag, const std::string& v) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::out_of_range&) {
    used = 0;
    x = INT64_MAX;  // digits beyond 64 bits: too large, said below
  } catch (const std::exception&) {
    throw UsageError("--" + flag + ": expected an integer, got '" + v + "'");
  }
  if (x == INT64_MAX || (used == v.size() && (x < INT32_MIN || x > INT32_MAX))) {
    throw UsageError("--" + flag + ": " + v + " is out of range (at most " +
                     std::to_string(INT32_MAX) + ")");
  }
  if (used != v.size()) throw UsageError("--" + flag + ": expected an integer, got '" + v + "'");
  return static_cast<int>(x);
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

// Command-line words -> a member's type. A switch takes no word, or one from "--flag=false".
void parse_into(const std::string& flag, const std::vector<std::string>& w, bool& v) {
  if (w.empty() || w[0] == "true" || w[0] == "True" || w[0] == "t" || w[0] == "T" || w[0] == "1") {
    v = true;
  } else if (w[0] == "false" || w[0] == "False" || w[0] == "f" || w[0] == "F" || w[0] == "0") {
    v = false;
  } else {
    throw UsageError("--" + flag + ": expected true or false, got '" + w[0] + "'");
  }
}
void parse_into(const std::string& flag, const std::vector<std::string>& w, int& v) {
  v = parse_int(flag, w.at(0));
}
void parse_into(const std::string& flag, const std::vector<std::string>& w, double& v) {
  v = parse_double(flag, w.at(0));
}
void parse_into(const std::string&, const std::vector<std::string>& w, std::string& v) {
  v = w.at(0);
}
// Each word may itself be a comma list ("--freeze=0,1,2").
void parse_into(const std::string& flag, const std::vector<std::string>& w, std::vector<int>& v) {
  v.clear();
  for (const auto& word : w) {
    size_t from = 0;
    for (size_t comma; (comma = word.find(',', from)) != std::string::npos; from = comma + 1) {
      v.push_back(parse_int(flag, word.substr(from, comma - from)));
    }
    v.push_back(parse_int(flag, word.substr(from)));
  }
}

// A member's opt.yaml value: what YOLOv5's yaml.safe_dump writes for it.
template <typename T>
YAML::Node to_node(const T& v) {
  if constexpr (std::is_same_v<T, double>) {
    return yaml_number(v);
  } else {
    return YAML::Node(v);
  }
}

// A member's value as --help shows it; "" shows none (switches are off, empty strings unset).
template <typename T>
std::string show(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return "";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<T, double>) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
  } else if constexpr (std::is_same_v<T, int>) {
    return std::to_string(v);
  } else {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
    return s;
  }
}

std::string upper(std::string s) {
  for (char& c : s) {
    c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return s;
}

// How a flag takes its value on the command line: argparse's forms, each also as --flag=value.
enum class Arity {
  kSwitch,    // --rect
  kOne,       // --epochs 3: the next word, whatever it is
  kOptional,  // --evolve [N]: the next word when it looks like a value, else Flag::bare
  kList,      // --freeze 0 1 2: every following word that looks like a value (nargs='+')
  kYamlOnly,  // no flag: an opt.yaml key only (save_dir)
};

// One train flag, declared once: what parses it, --help, validate_options and opt.yaml use.
struct Flag {
  std::string name;                  // without dashes; the spelling Options::given records
  std::vector<std::string> aliases;  // other accepted spellings, with dashes
  Arity arity = Arity::kOne;
  std::string bare;  // kOptional: the value of the flag given alone
  std::string metavar;
  std::string help;
  std::string yaml_key;  // YOLOv5's opt.yaml key; empty: not saved
  bool show_default = true;
  // Bound to one Options member by Bind below.
  std::function<void(Options&, const std::vector<std::string>&)> parse;  // throws UsageError
  std::function<std::string(const Options&)> check;  // what is wrong with the value, or ""
  std::function<YAML::Node(const Options&)> write;
  std::function<void(Options&, const YAML::Node&)> read;  // throws YAML::Exception: wrong type
  std::function<std::string()> default_text;
};

// Builds a Flag bound to the member `m`; the member's type gives the parsing, the opt.yaml form
// and the shown default (Options' initializer), and the methods adjust the rest.
template <typename T>
class Bind {
 public:
  using Rule = std::function<std::string(const T&)>;

  Bind(const char* name, T Options::*m, const char* yaml_key, const char* help) : m_(m) {
    f_.name = name;
    f_.yaml_key = yaml_key;
    f_.help = help;
    if constexpr (std::is_same_v<T, bool>) f_.arity = Arity::kSwitch;
    if constexpr (std::is_same_v<T, std::vector<int>>) f_.arity = Arity::kList;
    f_.metavar = std::is_same_v<T, int> || std::is_same_v<T, std::vector<int>> ? "N" : upper(name);
    const std::string flag = name;
    f_.parse = [m, flag](Options& o, const std::vector<std::string>& w) {
      parse_into(flag, w, o.*m);
    };
    f_.write = [m](const Options& o) { return to_node(o.*m); };
    f_.read = [m](Options& o, const YAML::Node& v) { o.*m = v.as<T>(); };
    f_.default_text = [m] { return show(Options{}.*m); };
  }
  Bind& alias(const char* spelling) {
    f_.aliases.emplace_back(spelling);
    return *this;
  }
  Bind& metavar(const char* m) {
    f_.metavar = m;
    return *this;
  }
  // The flag given alone means `bare`. While the member keeps its default (off), opt.yaml holds
  // null, as YOLOv5's.
  Bind& optional(const char* bare) {
    f_.arity = Arity::kOptional;
    f_.bare = bare;
    f_.write = [m = m_](const Options& o) {
      return o.*m == Options{}.*m ? YAML::Node(YAML::NodeType::Null) : to_node(o.*m);
    };
    return *this;
  }
  Bind& check(Rule rule) {
    f_.check = [m = m_, rule](const Options& o) { return rule(o.*m); };
    return *this;
  }
  Bind& parse_with(std::function<void(Options&, const std::string&)> parse) {
    f_.parse = [parse](Options& o, const std::vector<std::string>& w) { parse(o, w.at(0)); };
    return *this;
  }
  Bind& yaml_with(std::function<YAML::Node(const Options&)> write,
                  std::function<void(Options&, const YAML::Node&)> read) {
    if (write) f_.write = std::move(write);
    f_.read = std::move(read);
    return *this;
  }
  Bind& no_default() {
    f_.show_default = false;
    return *this;
  }
  Bind& yaml_only() {
    f_.arity = Arity::kYamlOnly;
    return *this;
  }
  // Implicit, so that the table can list Binds of any member type as Flags.
  operator Flag() const { return f_; }

 private:
  T Options::*m_;
  Flag f_;
};

// Rules for Bind::check: each says what is wrong with a value, or returns "".
Bind<int>::Rule at_least(int min, const char* what = nullptr) {
  return [min, what](const int& v) -> std::string {
    if (v >= min) return "";
    if (what) return what;
    return "must be >= " + std::to_string(min) + " (got " + std::to_string(v) + ")";
  };
}
// Empty means unset (the default); anything else must be one of `choices`.
Bind<std::string>::Rule empty_or_one_of(std::vector<std::string> choices) {
  return [choices](const std::string& v) -> std::string {
    if (v.empty() || std::count(choices.begin(), choices.end(), v)) return "";
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i) {
      list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + ("'" + choices[i] + "'");
    }
    return "must be " + list + " (got '" + v + "')";
  };
}
std::string check_batch_size(const int& v) {
  if (v == -1) return "-1 (AutoBatch) is not supported; give a batch size";
  return at_least(1)(v);
}
std::string check_imgsz(const int& v) {
  if (v >= 1 && v <= 8192) return "";
  return "must be between 1 and 8192 pixels (got " + std::to_string(v) + ")";
}
std::string check_optimizer(const std::string& v) {
  if (v == "SGD" || v == "Adam" || v == "AdamW") return "";
  return "unknown optimizer '" + v + "'; choose SGD, Adam or AdamW";
}
std::string check_project(const std::string& v) { return v.empty() ? "must not be empty" : ""; }
std::string check_name(const std::string& v) {
  if (!v.empty() && v.find('/') == std::string::npos) return "";
  return "must be a non-empty folder name without '/'";
}
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

// Every train flag, in opt.yaml's key order (YOLOv5 v7.0 train.py's, with this trainer's own
// flags near the end). Defaults are Options' initializers.
const std::vector<Flag>& flags() {
  using O = Options;
  static const std::vector<Flag> table = {
      Bind("weights", &O::weights, "weights", "initial weights path ('' = from scratch)")
          .metavar("PATH"),
      Bind("cfg", &O::cfg, "cfg", "model YAML path or bare name (configs/models)").metavar("PATH"),
      Bind("data", &O::data, "data", "dataset YAML path or bare name (configs/data)")
          .metavar("PATH"),
      Bind("hyp", &O::hyp, "hyp", "hyperparameters YAML path or bare name (hyp/)")
          .metavar("PATH")
          .yaml_with(nullptr, read_hyp),
      Bind("epochs", &O::epochs, "epochs", "total training epochs").check(at_least(1)),
      Bind("batch-size", &O::batch_size, "batch_size", "total batch size for all ranks")
          .alias("--batch")
          .check(check_batch_size),
      Bind("imgsz", &O::imgsz, "imgsz", "train, val image size in pixels")
          .alias("--img")
          .alias("--img-size")
          .check(check_imgsz),
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
          .metavar("SGD|Adam|AdamW")
          .check(check_optimizer),
      Bind("sync-bn", &O::sync_bn, "sync_bn", "use SyncBatchNorm, only available in DDP mode")
          .alias("--sync_bn"),
      Bind("workers", &O::workers, "workers", "max dataloader workers (per rank in DDP mode)")
          .check(at_least(0)),
      Bind("project", &O::project, "project", "save to project/name")
          .metavar("DIR")
          .check(check_project),
      Bind("name", &O::name, "name", "save to project/name").check(check_name),
      Bind("exist-ok", &O::exist_ok, "exist_ok", "existing project/name ok, do not increment"),
      Bind("quad", &O::quad, "quad", "quad dataloader"),
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
           "process group timeout in seconds (0: 60 for gloo, NCCL's default)")
          .metavar("SECONDS")
          .check(at_least(0, "must be >= 0 seconds")),
      // Not in opt.yaml: the workers run without it, and a resume may use it or not.
      Bind("nproc-per-node", &O::nproc_per_node, "",
           "start N DDP worker processes of train on this machine (N >= 2, or 'auto': one per "
           "GPU, 2 on CPU); no torchrun needed")
          .alias("--nproc_per_node")
          .metavar("N|auto")
          .no_default()
          .parse_with([](O& o, const std::string& v) { o.nproc_per_node = parse_nproc(v); })
          .check(check_nproc),
      Bind("save_dir", &O::save_dir, "save_dir", "").yaml_only(),  // set by train
  };
  return table;
}

const Flag* find_flag(const std::string& spelling) {
  for (const Flag& f : flags()) {
    if (f.arity == Arity::kYamlOnly) continue;
    if (spelling == "--" + f.name ||
        std::find(f.aliases.begin(), f.aliases.end(), spelling) != f.aliases.end()) {
      return &f;
    }
  }
  return nullptr;
}

// The words after argv[i] that give `f` its value (argparse's rules); moves i past them.
std::vector<std::string> take_values(const Flag& f, int argc, const char* const* argv, int& i) {
  std::vector<std::string> words;
  const auto next_is_value = [&] { return i + 1 < argc && looks_like_value(argv[i + 1]); };
  switch (f.arity) {
    case Arity::kOne:
      if (i + 1 == argc) throw UsageError("--" + f.name + ": expected a value (see train --help)");
      words.emplace_back(argv[++i]);
      break;
    case Arity::kOptional:
      words.push_back(next_is_value() ? argv[++i] : f.bare);
      break;
    case Arity::kList:
      while (next_is_value()) words.emplace_back(argv[++i]);
      if (words.empty()) {
        throw UsageError("--" + f.name + ": expected one or more values (see train --help)");
      }
      break;
    default:  // a switch
      break;
  }
  return words;
}

// "--batch-size, --batch N" as --help shows it.
std::string flag_usage(const Flag& f) {
  std::string s = "--" + f.name;
  for (const auto& a : f.aliases) s += ", " + a;
  switch (f.arity) {
    case Arity::kOne:
      return s + " " + f.metavar;
    case Arity::kOptional:
      return s + " [" + f.metavar + "]";
    case Arity::kList:
      return s + " " + f.metavar + " [" + f.metavar + " ...]";
    default:
      return s;
  }
}

std::string flag_description(const Flag& f) {
  std::string d = f.help;
  const std::string def = f.show_default ? f.default_text() : "";
  if (f.arity == Arity::kOptional && !f.bare.empty()) {
    d += " (alone: " + f.bare + ")";
  } else if (f.arity != Arity::kOptional && !def.empty()) {
    d += " (default: " + def + ")";
  }
  return d;
}

// `text` in lines of at most `width` columns, the lines after the first indented by `indent`.
std::string wrap(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (!line.empty() && indent + line.size() + 1 + w.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line;
}

std::string train_help() {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Flag& f : flags()) {
    if (f.arity != Arity::kYamlOnly) rows.emplace_back(flag_usage(f), flag_description(f));
  }
  rows.emplace_back(
      "--version", "print the versions of LibTorch, CUDA, cuDNN, NCCL and the GPUs seen, and exit");
  rows.emplace_back("-h, --help", "show this help and exit");
  const size_t col = 34, width = 100;
  std::string out =
      "Train a YOLOv5 model (YOLOv5 v7.0 train.py flags)\nUsage:\n  train [flags]\n\n";
  for (const auto& [usage, text] : rows) {
    std::string head = "  " + usage;
    head += head.size() + 2 <= col ? std::string(col - head.size(), ' ')
                                   : "\n" + std::string(col, ' ');  // too long: own line
    out += head + wrap(text, col, width) + "\n";
  }
  return out;
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
  ParsedTrainArgs out;
  std::vector<std::pair<const Flag*, std::vector<std::string>>> given;  // in command-line order
  std::vector<std::string> strays;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {  // everything after it is an argument, and train takes none
      for (++i; i < argc; ++i) strays.emplace_back(argv[i]);
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a == "--version") {
      out.version = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-') {
      strays.push_back(a);
      continue;
    }
    const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    const std::string spelling = a.substr(0, eq);
    const Flag* f = find_flag(spelling);
    if (!f) throw UsageError("unknown flag '" + spelling + "' (see train --help)");
    given.emplace_back(f, eq == std::string::npos ? take_values(*f, argc, argv, i)
                                                  : std::vector<std::string>{a.substr(eq + 1)});
  }
  if (out.help) {
    out.help_text = train_help();
    return out;
  }
  if (out.version) return out;
  if (!strays.empty()) {
    throw UsageError("unexpected argument '" + strays[0] + "' (see train --help)");
  }
  Options& o = out.opt;
  for (const auto& [f, words] : given) {
    f->parse(o, words);
    if (!o.was_given(f->name)) o.given.push_back(f->name);
  }
  for (const auto& flag : o.given) {
    if (reject_unimplemented && kNotImplementedYet.count(flag)) {
      throw UsageError("--" + flag + " is not implemented yet in this build; remove it");
    }
  }
  validate_options(o);
  if (o.nproc_per_node != 0) {
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
  for (const Flag& f : flags()) {
    if (!f.check) continue;
    const std::string what = f.check(o);
    if (!what.empty()) throw UsageError("--" + f.name + ": " + what);
  }
  // Checks across flags.
  if (o.nproc_per_node != 0 && o.evolve > 0) {
    throw UsageError(
        "--nproc-per-node: cannot be used with --evolve (evolution trains one process at a time)");
  }
  if (o.nproc_per_node != 0 && o.local_rank != -1) {
    throw UsageError(
        "--nproc-per-node: cannot be used with --local_rank (the launcher sets each worker's "
        "rank)");
  }
}

void resolve_option_files(Options& o) {
  // With --weights and no --cfg the weights name the architecture (read by the trainer).
  if (o.cfg.empty() && o.weights.empty()) o.cfg = "yolov5s.yaml";
  if (!o.cfg.empty()) o.cfg = resolve_config(o.cfg, ConfigKind::kModel, "--cfg");
  o.data = resolve_config(o.data, ConfigKind::kData, "--data");
  o.hyp = resolve_config(o.hyp, ConfigKind::kHyp, "--hyp");
  std::error_code ec;
  if (!o.weights.empty() && !std::filesystem::is_regular_file(o.weights, ec)) {
    throw UsageError("--weights: file '" + o.weights +
                     "' not found; this trainer does not download weights (pass a local YOLOv5 .pt "
                     "such as yolov5s.pt, or one this trainer wrote, or --weights '' to start "
                     "from scratch)");
  }
}

YAML::Node options_to_yaml(const Options& o) {
  YAML::Node n;
  for (const Flag& f : flags()) {
    if (!f.yaml_key.empty()) n[f.yaml_key] = f.write(o);
  }
  return n;
}

// Keys the file lacks, or holds null, keep their defaults: YOLOv5's files lack this trainer's
// own keys and write null for unset optional values.
Options options_from_yaml(const YAML::Node& n, const std::string& ctx) {
  if (!n.IsMap()) throw std::runtime_error(ctx + ": expected a mapping of option names to values");
  Options o;
  for (const Flag& f : flags()) {
    if (f.yaml_key.empty()) continue;
    const YAML::Node v = n[f.yaml_key];
    if (!v || v.IsNull()) continue;
    try {
      f.read(o, v);
    } catch (const YAML::Exception&) {
      throw std::runtime_error(ctx + ":" + std::to_string(v.Mark().line + 1) + ": key '" +
                               f.yaml_key + "' has the wrong type");
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

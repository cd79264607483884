#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <tuple>

#include "utils/core/errors.h"
#include "utils/core/paths.h"
#include "utils/core/yaml_io.h"
#include "utils/engine/hyp.h"
#include "utils/engine/train_options.h"
#include "utils/eval/loss.h"

namespace fs = std::filesystem;
using yolo::Options;
using yolo::parse_train_args;
using yolo::UsageError;

namespace {
yolo::CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_args(static_cast<int>(argv.size()), argv.data());
}

Options parse_all(std::vector<std::string> args) { return parse(std::move(args)).opt; }

std::string usage_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Options, DefaultsMatchYolov5TrainPy) {
  const Options o = parse({}).opt;
  EXPECT_EQ(o.weights, "");
  EXPECT_EQ(o.data, "shapes.yaml");
  EXPECT_EQ(o.hyp, "hyp.scratch-low.yaml");
  EXPECT_EQ(o.epochs, 100);
  EXPECT_EQ(o.batch_size, 16);
  EXPECT_EQ(o.imgsz, 640);
  EXPECT_EQ(o.optimizer, "SGD");
  EXPECT_EQ(o.workers, 8);
  EXPECT_EQ(o.project, "runs/train");
  EXPECT_EQ(o.name, "exp");
  EXPECT_EQ(o.patience, 100);
  EXPECT_EQ(o.freeze, std::vector<int>{0});
  EXPECT_EQ(o.save_period, -1);
  EXPECT_EQ(o.seed, 0);
  EXPECT_EQ(o.local_rank, -1);
  EXPECT_DOUBLE_EQ(o.label_smoothing, 0.0);
  EXPECT_FALSE(o.resume);
  EXPECT_EQ(o.evolve, 0);
  EXPECT_TRUE(o.cache.empty());
  EXPECT_TRUE(o.given.empty());
}

TEST(Options, ParsesValuesAndAliases) {
  const Options o = parse({"--img", "320", "--batch", "8", "--epochs=3", "--device", "cpu",
                           "--optimizer", "AdamW", "--noplots", "--exist-ok", "--local_rank", "1"})
                        .opt;
  EXPECT_EQ(o.imgsz, 320);
  EXPECT_EQ(o.batch_size, 8);
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.optimizer, "AdamW");
  EXPECT_TRUE(o.noplots);
  EXPECT_TRUE(o.exist_ok);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_TRUE(o.was_given("imgsz"));
  EXPECT_TRUE(o.was_given("batch-size"));
  EXPECT_FALSE(o.was_given("hyp"));
  EXPECT_EQ(parse({"--img-size", "416"}).opt.imgsz, 416);
  EXPECT_EQ(parse({"--local-rank=2"}).opt.local_rank, 2);
}

// argparse spellings: optional values as the next word, nargs='+' lists, negative numbers.
TEST(Options, ArgparseStyleOptionalValuesAndLists) {
  Options o = parse_all({"--resume"});
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.resume_path, "");
  o = parse_all({"--resume", "runs/train/exp/weights/last.pt", "--epochs", "5"});
  EXPECT_EQ(o.resume_path, "runs/train/exp/weights/last.pt");
  EXPECT_EQ(o.epochs, 5);
  EXPECT_EQ(parse_all({"--evolve"}).evolve, 300);
  EXPECT_EQ(parse_all({"--evolve", "12"}).evolve, 12);
  EXPECT_EQ(parse_all({"--cache"}).cache, "ram");
  EXPECT_EQ(parse_all({"--cache", "disk"}).cache, "disk");
  EXPECT_EQ(parse_all({"--freeze", "10"}).freeze, std::vector<int>{10});
  EXPECT_EQ(parse_all({"--freeze", "0", "1", "2", "--rect"}).freeze, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(parse_all({"--freeze", "0", "1", "--rect"}).rect);
  EXPECT_EQ(parse_all({"--save-period", "-1"}).save_period, -1);
  EXPECT_EQ(parse_all({"--seed", "-7"}).seed, -7);
  EXPECT_DOUBLE_EQ(parse_all({"--label-smoothing", "0.1"}).label_smoothing, 0.1);
  EXPECT_THROW(parse_all({"--freeze"}), UsageError);
  EXPECT_THROW(parse_all({"--cache", "gpu"}), UsageError);
  EXPECT_THROW(parse_all({"--evolve", "x"}), UsageError);
  EXPECT_THROW(parse_all({"--dist-backend", "mpi"}), UsageError);
}

TEST(Options, HelpListsEveryYolov5Flag) {
  const auto r = parse({"--help"});
  ASSERT_TRUE(r.help);
  for (const char* flag : {"--weights",    "--cfg",          "--data",        "--hyp",
                           "--epochs",     "--batch-size",   "--imgsz",       "--rect",
                           "--resume",     "--nosave",       "--noval",       "--noautoanchor",
                           "--noplots",    "--evolve",       "--cache",       "--image-weights",
                           "--device",     "--multi-scale",  "--single-cls",  "--optimizer",
                           "--sync-bn",    "--workers",      "--project",     "--name",
                           "--exist-ok",   "--quad",         "--cos-lr",      "--label-smoothing",
                           "--patience",   "--freeze",       "--save-period", "--seed",
                           "--local_rank", "--dist-backend", "--dist-timeout"}) {
    EXPECT_NE(r.help_text.find(flag), std::string::npos) << flag;
  }
}

TEST(Options, BadValuesNameTheFlag) {
  EXPECT_NE(usage_error({"--epochs", "-3"}).find("--epochs"), std::string::npos);
  EXPECT_NE(usage_error({"--epochs", "0"}).find("--epochs"), std::string::npos);
  EXPECT_NE(usage_error({"--batch-size", "0"}).find("--batch-size"), std::string::npos);
  EXPECT_NE(usage_error({"--batch-size", "-2"}).find("-1 for AutoBatch"), std::string::npos);
  EXPECT_EQ(usage_error({"--batch-size", "-1"}), "");  // AutoBatch
  EXPECT_NE(usage_error({"--imgsz", "0"}).find("--imgsz"), std::string::npos);
  EXPECT_NE(usage_error({"--imgsz", "-64"}).find("--imgsz"), std::string::npos);
  EXPECT_NE(usage_error({"--optimizer", "RMSProp"}).find("--optimizer"), std::string::npos);
  EXPECT_NE(usage_error({"--workers", "-1"}).find("--workers"), std::string::npos);
  EXPECT_NE(usage_error({"--name", "a/b"}).find("--name"), std::string::npos);
  EXPECT_NE(usage_error({"--epochs", "ten"}).find("epochs"), std::string::npos);
}

TEST(Options, UnknownFlagsAndStrayArgumentsAreRejected) {
  EXPECT_NE(usage_error({"--bogus"}).find("bogus"), std::string::npos);
  EXPECT_NE(usage_error({"stray"}).find("stray"), std::string::npos);
}

TEST(Options, DistributedFlagsParse) {
  const Options o = parse({"--dist-backend=gloo", "--dist-timeout", "30", "--local_rank", "1"}).opt;
  EXPECT_EQ(o.dist_backend, "gloo");
  EXPECT_EQ(o.dist_timeout, 30);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_NE(usage_error({"--dist-timeout", "-5"}).find("--dist-timeout"), std::string::npos);
}

TEST(Options, YamlRoundTrip) {
  Options o;
  o.weights = "w.pt";
  o.cfg = "configs/models/yolov5n.yaml";
  o.epochs = 7;
  o.batch_size = 32;
  o.imgsz = 320;
  o.cache = "disk";
  o.evolve = 10;
  o.resume = true;
  o.resume_path = "runs/train/exp/weights/last.pt";
  o.freeze = {0, 1, 2};
  o.label_smoothing = 0.1;
  o.optimizer = "Adam";
  o.sync_bn = true;
  o.dist_backend = "gloo";
  o.dist_timeout = 90;
  o.save_dir = "runs/train/exp3";
  const fs::path p = fs::temp_directory_path() / "yolo_test_opt.yaml";
  yolo::save_options(o, p.string());
  const Options r = yolo::load_options(p.string());
  fs::remove(p);
  EXPECT_EQ(r.weights, o.weights);
  EXPECT_EQ(r.cfg, o.cfg);
  EXPECT_EQ(r.epochs, 7);
  EXPECT_EQ(r.batch_size, 32);
  EXPECT_EQ(r.imgsz, 320);
  EXPECT_EQ(r.cache, "disk");
  EXPECT_EQ(r.evolve, 10);
  EXPECT_TRUE(r.resume);
  EXPECT_EQ(r.resume_path, o.resume_path);
  EXPECT_EQ(r.freeze, o.freeze);
  EXPECT_DOUBLE_EQ(r.label_smoothing, 0.1);
  EXPECT_EQ(r.optimizer, "Adam");
  EXPECT_TRUE(r.sync_bn);
  EXPECT_EQ(r.dist_backend, "gloo");
  EXPECT_EQ(r.dist_timeout, 90);
  EXPECT_EQ(r.save_dir, "runs/train/exp3");
}

TEST(Options, ReadsYolov5StyleOptYaml) {
  // YOLOv5 writes nulls for unset optional values and 'false' for resume.
  const YAML::Node n = YAML::Load(
      "weights: yolov5s.pt\ncfg: ''\nepochs: 3\nbatch_size: 16\nimgsz: 640\nresume: false\n"
      "evolve: null\ncache: null\nfreeze: [0]\nsave_dir: runs/train/exp\nentity: null\n");
  const Options o = yolo::options_from_yaml(n, "opt.yaml");
  EXPECT_EQ(o.weights, "yolov5s.pt");
  EXPECT_EQ(o.epochs, 3);
  EXPECT_FALSE(o.resume);
  EXPECT_EQ(o.evolve, 0);
  EXPECT_TRUE(o.cache.empty());
}

TEST(Options, WrongTypeInOptYamlNamesKeyAndLine) {
  const YAML::Node n = YAML::Load("epochs: 3\nbatch_size: many\n");
  try {
    yolo::options_from_yaml(n, "opt.yaml");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("opt.yaml:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch_size"), std::string::npos) << e.what();
  }
}

TEST(Options, NprocPerNodeTakesAutoOrTwoOrMore) {
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(parse({}).opt.nproc_per_node, 0);
  EXPECT_EQ(parse({"--nproc-per-node", "2"}).opt.nproc_per_node, 2);
  EXPECT_EQ(parse({"--nproc-per-node=8"}).opt.nproc_per_node, 8);
  EXPECT_EQ(parse({"--nproc_per_node", "auto"}).opt.nproc_per_node, -1);
  for (const char* bad : {"1", "0", "-2", "two", "2.5"}) {
    const std::string msg = usage_error({"--nproc-per-node", bad});
    EXPECT_NE(msg.find("--nproc-per-node"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_NE(usage_error({"--nproc-per-node"}).find("nproc-per-node"), std::string::npos);
  EXPECT_NE(parse({"--help"}).help_text.find("--nproc-per-node"), std::string::npos);
}

TEST(Options, NprocPerNodeIsAcceptedWithResumeAndKeptOutOfOptYaml) {
  unsetenv("LOCAL_RANK");
  const Options o = parse({"--resume", "--nproc-per-node", "2"}).opt;
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.nproc_per_node, 2);
  const YAML::Node n = yolo::options_to_yaml(o);
  EXPECT_FALSE(n["nproc_per_node"]);
  EXPECT_FALSE(n["nproc-per-node"]);
  EXPECT_EQ(yolo::options_from_yaml(n, "opt.yaml").nproc_per_node, 0);
}

namespace {
// Every Options member opt.yaml keeps (all but `given` and nproc_per_node).
auto saved_fields(const Options& o) {
  return std::tie(o.weights, o.cfg, o.data, o.hyp, o.hyp_set, o.epochs, o.batch_size, o.imgsz,
                  o.rect, o.resume, o.resume_path, o.nosave, o.noval, o.noautoanchor, o.noplots,
                  o.evolve, o.cache, o.image_weights, o.device, o.multi_scale, o.single_cls,
                  o.optimizer, o.sync_bn, o.workers, o.project, o.name, o.exist_ok, o.quad,
                  o.close_mosaic, o.cos_lr, o.label_smoothing, o.patience, o.freeze, o.save_period,
                  o.seed, o.deterministic, o.memory_format, o.augment_device, o.local_rank,
                  o.dist_backend, o.dist_timeout, o.save_dir);
}

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::vector<std::string> keys_of(const YAML::Node& n) {
  std::vector<std::string> keys;
  for (const auto& kv : n) keys.push_back(kv.first.Scalar());
  return keys;
}

// A flag's --help entry (its line and any wrapped lines), whitespace collapsed.
std::string help_entry(const std::string& help, const std::string& flag) {
  const size_t at = help.find("\n  " + flag);
  if (at == std::string::npos) return "";
  const size_t end = help.find("\n  -", at + 1);
  std::string entry = help.substr(at + 1, end == std::string::npos ? end : end - at - 1);
  return std::regex_replace(entry, std::regex("\\s+"), " ");
}
}  // namespace

// Every opt.yaml key set to a non-default value through its flag (aliases included) comes back
// from opt.yaml unchanged.
TEST(Options, EveryFlagRoundTripsThroughOptYaml) {
  unsetenv("LOCAL_RANK");
  Options o = parse_all(split_words(
      "--weights w.pt --cfg m.yaml --data d.yaml --hyp h.yaml --hyp-set lr0=0.02 mosaic=0.5 "
      "--epochs 7 --batch 32 --img 320 "
      "--rect --resume runs/x/weights/last.pt --nosave --noval --noautoanchor --noplots "
      "--evolve 5 --cache disk --image-weights --device 0,1 --multi-scale --single-cls "
      "--optimizer AdamW --sync_bn --workers 3 --project p --name n --exist-ok --quad "
      "--close-mosaic 4 --cos-lr "
      "--label-smoothing 0.1 --patience 9 --freeze 0 1 2 --save-period 2 --seed -4 "
      "--deterministic --memory-format contiguous --augment-device cuda --local-rank 1 "
      "--dist-backend gloo "
      "--dist-timeout 30"));
  o.save_dir = "runs/train/exp3";
  const YAML::Node n = yolo::options_to_yaml(o), defaults = yolo::options_to_yaml(Options{});
  for (const auto& key : keys_of(defaults)) {  // the command line above covers every key
    EXPECT_NE(yolo::yaml_dump(n[key]), yolo::yaml_dump(defaults[key])) << key;
  }
  const std::string text = yolo::yaml_dump(n);
  const Options r = yolo::options_from_yaml(YAML::Load(text), "opt.yaml");
  EXPECT_TRUE(saved_fields(r) == saved_fields(o)) << text;
  EXPECT_EQ(yolo::yaml_dump(yolo::options_to_yaml(r)), text);
}

TEST(Options, OptYamlKeysAndValueFormsAreYolov5s) {
  const YAML::Node n = yolo::options_to_yaml(Options{});
  // clang-format off
  const std::vector<std::string> want = {
      "weights",         "cfg",             "data",            "hyp",
      "hyp_set",
      "epochs",          "batch_size",      "imgsz",           "rect",
      "resume",          "nosave",          "noval",           "noautoanchor",
      "noplots",         "evolve",          "cache",           "image_weights",
      "device",          "multi_scale",     "single_cls",      "optimizer",
      "sync_bn",         "workers",         "project",         "name",
      "exist_ok",        "quad",            "close_mosaic",    "cos_lr",
      "label_smoothing", "patience",        "freeze",          "save_period",
      "seed",            "deterministic",   "memory_format",   "augment_device",
      "local_rank",      "dist_backend",    "dist_timeout",    "save_dir",
  };
  // clang-format on
  EXPECT_EQ(keys_of(n), want);
  EXPECT_EQ(n["resume"].Scalar(), "false");
  EXPECT_TRUE(n["evolve"].IsNull());
  EXPECT_TRUE(n["cache"].IsNull());
  EXPECT_TRUE(n["freeze"].IsSequence());
  Options o;
  o.resume = true;
  EXPECT_EQ(yolo::options_to_yaml(o)["resume"].Scalar(), "true");
  o.resume_path = "a/last.pt";
  o.label_smoothing = 0.1;
  EXPECT_EQ(yolo::options_to_yaml(o)["resume"].Scalar(), "a/last.pt");
  EXPECT_EQ(yolo::options_to_yaml(o)["label_smoothing"].Scalar(), "0.1");
}

TEST(Options, ReadsOptYamlWithInlinedHyp) {
  // YOLOv5's opt.yaml holds the hyp dict itself, not a path.
  const Options o = yolo::options_from_yaml(
      YAML::Load("epochs: 4\nhyp:\n  lr0: 0.01\n  lrf: 0.1\nsync_bn: true\n"), "opt.yaml");
  EXPECT_EQ(o.epochs, 4);
  EXPECT_EQ(o.hyp, "");
  EXPECT_TRUE(o.sync_bn);
  EXPECT_THROW(yolo::options_from_yaml(YAML::Load("resume: [1]\n"), "opt.yaml"),
               std::runtime_error);
}

TEST(Options, HelpShowsEveryFlagWithItsAliasesAndDefaults) {
  unsetenv("LOCAL_RANK");
  const std::string help = parse({"--help"}).help_text;
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"--batch-size", "--batch"},
      {"--imgsz", "--img"},
      {"--imgsz", "--img-size"},
      {"--local_rank", "--local-rank"},
      {"--sync-bn", "--sync_bn"},
      {"--nproc-per-node", "--nproc_per_node"},
      {"--epochs", "(default: 100)"},
      {"--batch-size", "(default: 16)"},
      {"--imgsz", "(default: 640)"},
      {"--data", "(default: shapes.yaml)"},
      {"--hyp", "(default: hyp.scratch-low.yaml)"},
      {"--evolve", "300"},
      {"--cache", "ram"},
      {"--freeze", "(default: 0)"},
      {"--optimizer", "(default: SGD)"},
      {"--deterministic", "cuDNN"},
      {"--dist-timeout", "(default: 0)"},
      {"--version", "versions"},
      {"-h, --help", "help"}};
  for (const auto& [flag, text] : expected) {
    EXPECT_NE(help_entry(help, flag).find(text), std::string::npos) << flag << ": " << text;
  }
  // Every spelling the help shows is one the parser knows.
  const std::regex spelling("--[A-Za-z][-A-Za-z_]*");
  size_t spellings = 0;
  for (auto it = std::sregex_iterator(help.begin(), help.end(), spelling);
       it != std::sregex_iterator(); ++it, ++spellings) {
    EXPECT_EQ(usage_error({it->str()}).find("unknown flag"), std::string::npos) << it->str();
  }
  EXPECT_GE(spellings, 45u);  // 37 flags, 6 aliases, --version and --help
}

TEST(Options, MalformedValuesAndMissingValuesNameTheFlag) {
  EXPECT_EQ(usage_error({"--epochs", "ten"}), "--epochs: expected an integer, got 'ten'");
  EXPECT_EQ(usage_error({"--freeze", "0", "x"}), "--freeze: expected an integer, got 'x'");
  EXPECT_NE(usage_error({"--label-smoothing", "x"}).find("--label-smoothing"), std::string::npos);
  EXPECT_NE(usage_error({"--rect=maybe"}).find("--rect"), std::string::npos);
  EXPECT_NE(usage_error({"--weights"}).find("--weights"), std::string::npos);
  EXPECT_NE(usage_error({"--bogus=1"}).find("'--bogus' (see train --help)"), std::string::npos);
  EXPECT_NE(usage_error({"--rect", "stray"}).find("'stray' (see train --help)"), std::string::npos);
  EXPECT_EQ(parse_all({"--freeze=1,2"}).freeze, (std::vector<int>{1, 2}));
  EXPECT_FALSE(parse_all({"--rect=false"}).rect);
  EXPECT_EQ(parse_all({"--cache", "--rect"}).cache, "ram");
}

namespace {
// A hyp file's text with every required key, lr0 = 1, lrf = 2, ...
std::string full_hyp_yaml(const std::string& extra = "") {
  std::string text;
  int i = 1;
  for (const auto& k : yolo::required_hyp_keys()) text += k + ": " + std::to_string(i++) + "\n";
  return text + extra;
}

std::string hyp_error(const std::string& text) {
  try {
    yolo::hyp_from_yaml(YAML::Load(text), "h.yaml");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Hyp, TypedMembersAreTheNamedValues) {
  const yolo::Hyp h = yolo::hyp_from_yaml(YAML::Load(full_hyp_yaml()), "h.yaml");
  const std::vector<std::pair<std::string, double>> members = {
      {"lr0", h.lr0},
      {"lrf", h.lrf},
      {"momentum", h.momentum},
      {"weight_decay", h.weight_decay},
      {"warmup_epochs", h.warmup_epochs},
      {"warmup_momentum", h.warmup_momentum},
      {"warmup_bias_lr", h.warmup_bias_lr},
      {"box", h.box},
      {"cls", h.cls},
      {"cls_pw", h.cls_pw},
      {"obj", h.obj},
      {"obj_pw", h.obj_pw},
      {"iou_t", h.iou_t},
      {"anchor_t", h.anchor_t},
      {"fl_gamma", h.fl_gamma},
      {"hsv_h", h.hsv_h},
      {"hsv_s", h.hsv_s},
      {"hsv_v", h.hsv_v},
      {"degrees", h.degrees},
      {"translate", h.translate},
      {"scale", h.scale},
      {"shear", h.shear},
      {"perspective", h.perspective},
      {"flipud", h.flipud},
      {"fliplr", h.fliplr},
      {"mosaic", h.mosaic},
      {"mixup", h.mixup},
      {"copy_paste", h.copy_paste}};
  ASSERT_EQ(members.size(), yolo::required_hyp_keys().size());
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_EQ(members[i].first, yolo::required_hyp_keys()[i]);  // YOLOv5's order
    EXPECT_DOUBLE_EQ(members[i].second, static_cast<double>(i + 1)) << members[i].first;
    EXPECT_DOUBLE_EQ(h.at(members[i].first), members[i].second) << members[i].first;
  }
  yolo::Hyp s = h;
  s.set("hsv_v", 0.25);
  EXPECT_DOUBLE_EQ(s.hsv_v, 0.25);
  EXPECT_DOUBLE_EQ(s.hsv_s, h.hsv_s);
  EXPECT_THROW(s.set("hsv", 1.0), std::logic_error);
  EXPECT_THROW(h.at("hsv"), std::logic_error);
  EXPECT_DOUBLE_EQ(h.get("hsv", 7.0), 7.0);
}

TEST(Hyp, ShippedFilesLoad) {
  for (const char* f : {"hyp.scratch-low.yaml", "hyp.scratch-med.yaml", "hyp.scratch-high.yaml",
                        "hyp.scratch-short.yaml"}) {
    const yolo::Hyp h = yolo::load_hyp(yolo::project_root() + "/hyp/" + f);
    EXPECT_GT(h.lr0, 0.0) << f;
    EXPECT_FALSE(h.has_anchors) << f;
  }
}

// --hyp-set: values over the file's, checked as the file's are.
TEST(Hyp, HypSetOverridesTheFileAndIsChecked) {
  const yolo::Hyp file = yolo::load_hyp(yolo::project_root() + "/hyp/hyp.scratch-low.yaml");
  const yolo::Hyp h = yolo::apply_hyp_set(file, {"lr0=0.02", "mosaic=0.5", "dfl=2"});
  EXPECT_DOUBLE_EQ(h.lr0, 0.02);
  EXPECT_DOUBLE_EQ(h.mosaic, 0.5);
  EXPECT_DOUBLE_EQ(h.dfl, 2.0);
  EXPECT_TRUE(h.has_dfl);
  EXPECT_DOUBLE_EQ(h.lrf, file.lrf);
  EXPECT_DOUBLE_EQ(h.momentum, file.momentum);
  EXPECT_EQ(yolo::check_hyp_set({"lr0=0.02", "fliplr=0"}), "");
  EXPECT_NE(yolo::check_hyp_set({"lr=0.02"}).find("did you mean 'lr0' or 'lrf'?"),
            std::string::npos);
  EXPECT_NE(yolo::check_hyp_set({"lr0"}).find("not key=value"), std::string::npos);
  EXPECT_NE(yolo::check_hyp_set({"lr0=fast"}).find("must be a number"), std::string::npos);
  EXPECT_NE(usage_error({"--hyp-set", "lr=1"}).find("--hyp-set: unknown hyperparameter 'lr'"),
            std::string::npos);
  try {
    yolo::apply_hyp_set(file, {"lr0=-1"});
    FAIL() << "a negative learning rate was taken";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--hyp-set"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lr0"), std::string::npos) << e.what();
  }
}

// The short-schedule file is YOLOv5's scratch-low with AdamW's learning rate, and nothing else.
TEST(Hyp, ShortScheduleDiffersFromScratchLowOnlyInLearningRate) {
  const yolo::Hyp low = yolo::load_hyp(yolo::project_root() + "/hyp/hyp.scratch-low.yaml");
  const yolo::Hyp fast = yolo::load_hyp(yolo::project_root() + "/hyp/hyp.scratch-short.yaml");
  EXPECT_DOUBLE_EQ(fast.lr0, 0.002);
  EXPECT_DOUBLE_EQ(fast.lrf, 0.1);
  for (const std::string& key : yolo::required_hyp_keys()) {
    if (key != "lr0" && key != "lrf") {
      EXPECT_DOUBLE_EQ(fast.at(key), low.at(key)) << key;
    }
  }
}

TEST(Hyp, AnchorsAreKeptOnlyWhenGiven) {
  yolo::Hyp h = yolo::hyp_from_yaml(YAML::Load(full_hyp_yaml()), "h.yaml");
  EXPECT_DOUBLE_EQ(h.get("anchors", 3.0), 3.0);
  EXPECT_THROW(h.at("anchors"), std::runtime_error);
  EXPECT_EQ(keys_of(yolo::hyp_to_yaml(h)), yolo::required_hyp_keys());
  // YOLOv5's evolution writes anchors (after anchor_t); it comes back in the same place.
  h = yolo::hyp_from_yaml(YAML::Load(full_hyp_yaml("anchors: 3.5\n")), "h.yaml");
  EXPECT_TRUE(h.has_anchors);
  EXPECT_DOUBLE_EQ(h.anchors, 3.5);
  const YAML::Node n = yolo::hyp_to_yaml(h);
  std::vector<std::string> keys = yolo::required_hyp_keys();
  keys.insert(std::find(keys.begin(), keys.end(), "anchor_t") + 1, "anchors");
  EXPECT_EQ(keys_of(n), keys);
  const yolo::Hyp back = yolo::hyp_from_yaml(YAML::Load(yolo::yaml_dump(n)), "h.yaml");
  EXPECT_DOUBLE_EQ(back.anchors, 3.5);
  EXPECT_DOUBLE_EQ(back.copy_paste, h.copy_paste);
}

TEST(Hyp, ErrorsNameFileLineAndKey) {
  const size_t n = yolo::required_hyp_keys().size();
  const std::string last_line = std::to_string(n + 1);
  EXPECT_EQ(hyp_error(full_hyp_yaml("lr_0: 0.1\n")),
            "h.yaml:" + last_line + ": unknown hyperparameter 'lr_0' (did you mean 'lr0'?)");
  EXPECT_NE(hyp_error(full_hyp_yaml("albumentations: [Blur]\n"))
                .find("h.yaml:" + last_line + ": unknown hyperparameter 'albumentations'"),
            std::string::npos);
  EXPECT_NE(hyp_error("lr0: [0.1]\n").find("h.yaml:1: 'lr0' must be a number, got a list"),
            std::string::npos);
  EXPECT_NE(hyp_error("lr0: fast\n").find("h.yaml:1: 'lr0' must be a number, got 'fast'"),
            std::string::npos);
  EXPECT_EQ(
      hyp_error("lr0: 0.01\n"),
      "h.yaml: missing hyperparameter 'lrf' (see hyp/hyp.scratch-low.yaml for the full list)");
}

TEST(Loss, GainsScaleWithLayersClassesAndImageSize) {
  yolo::Hyp h;
  for (const auto& k : yolo::required_hyp_keys()) h.set(k, 0.0);
  h.set("box", 0.05);
  h.set("cls", 0.5);
  h.set("obj", 1.0);
  const auto g = yolo::scale_loss_gains(h, 3, 20, 320, 0.1);
  EXPECT_DOUBLE_EQ(g.box, 0.05);
  EXPECT_DOUBLE_EQ(g.cls, 0.5 * 20 / 80);
  EXPECT_DOUBLE_EQ(g.obj, 0.25);
  EXPECT_DOUBLE_EQ(g.label_smoothing, 0.1);
}

// opt.yaml is held to the rules of the flags it came from: a key no version of train wrote (a
// typo, a hand edit) and a value its flag refuses are errors naming the file, line and key,
// never a default in their place. YOLOv5's own logger keys are accepted.
TEST(Options, OptYamlUnknownKeysAndBadValuesNameFileLineAndKey) {
  auto error = [](const std::string& text) {
    try {
      yolo::options_from_yaml(YAML::Load(text), "runs/train/exp/opt.yaml");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("epochs: 3\nepoch: 5\n").find("runs/train/exp/opt.yaml:2: unknown key 'epoch'"),
            std::string::npos)
      << error("epochs: 3\nepoch: 5\n");
  EXPECT_NE(error("imgsz: 64\nepochs: -1\n").find("opt.yaml:2: key 'epochs': must be >= 1"),
            std::string::npos)
      << error("imgsz: 64\nepochs: -1\n");
  EXPECT_NE(error("imgsz: 99999\n").find("opt.yaml:1: key 'imgsz': must be between 1 and 8192"),
            std::string::npos);
  EXPECT_NE(error("optimizer: sgd\n").find("key 'optimizer': unknown optimizer 'sgd'"),
            std::string::npos);
  EXPECT_NE(error("cache: tape\n").find("key 'cache'"), std::string::npos);
  EXPECT_EQ(error("epochs: 3\nbucket: ''\nentity: null\nupload_dataset: false\n"
                  "bbox_interval: -1\nartifact_alias: latest\n"),
            "no error");
}

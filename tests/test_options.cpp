#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "utils/errors.h"
#include "utils/options.h"

namespace fs = std::filesystem;
using yolo::Options;
using yolo::parse_train_args;
using yolo::UsageError;

namespace {
yolo::ParsedTrainArgs parse(std::vector<std::string> args, bool reject_unimplemented = true) {
  args.insert(args.begin(), "train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_args(static_cast<int>(argv.size()), argv.data(), reject_unimplemented);
}

Options parse_all(std::vector<std::string> args) { return parse(std::move(args), false).opt; }

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
  EXPECT_NE(usage_error({"--batch-size", "-1"}).find("AutoBatch"), std::string::npos);
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

TEST(Options, UnimplementedFlagsAreRejectedNotIgnored) {
  for (const char* f : {"--quad"}) {
    const std::string msg = usage_error({f});
    EXPECT_NE(msg.find("not implemented"), std::string::npos) << f << ": " << msg;
    EXPECT_NE(msg.find(std::string(f).substr(0, std::string(f).find('='))), std::string::npos)
        << f << ": " << msg;
  }
}

TEST(Options, DistributedFlagsParse) {
  const Options o =
      parse({"--dist-backend=gloo", "--dist-timeout", "30", "--local_rank", "1"}, true).opt;
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

TEST(Options, NprocPerNodeRefusesEvolveLocalRankAndTorchrun) {
  unsetenv("LOCAL_RANK");
  std::string msg = usage_error({"--nproc-per-node", "2", "--evolve"});
  EXPECT_NE(msg.find("--nproc-per-node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--evolve"), std::string::npos) << msg;
  msg = usage_error({"--nproc-per-node", "2", "--local_rank", "0"});
  EXPECT_NE(msg.find("--local_rank"), std::string::npos) << msg;
  setenv("LOCAL_RANK", "1", 1);
  msg = usage_error({"--nproc-per-node", "auto"});
  unsetenv("LOCAL_RANK");
  EXPECT_NE(msg.find("--nproc-per-node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("torchrun"), std::string::npos) << msg;
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

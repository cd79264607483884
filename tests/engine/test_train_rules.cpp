// train's rules across flags and the environment, one row per case: the command line, what the
// environment says, and the message expected (or none).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "utils/engine/train_options.h"
#include "utils/engine/train_rules.h"

namespace {

yolo::Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return yolo::parse_train_args(static_cast<int>(argv.size()), argv.data()).opt;
}

// Cases give only the fields they need (the rest keep their defaults).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

struct Case {
  const char* what;
  std::vector<std::string> args;
  int world_size = 1;
  std::string world_size_env;  // WORLD_SIZE
  std::string local_rank_env;  // LOCAL_RANK; "" when unset
  bool cuda = false;
  std::string expected;  // a part of the message; "" when every rule holds
  // The resumed run's own options (opt.yaml), applied to the resolved options.
  void (*resumed)(yolo::Options&) = nullptr;
};

std::string broken(const Case& c) {
  const yolo::Options cli = parse(c.args);
  yolo::Options opt = cli;
  if (c.resumed) {
    opt = yolo::Options{};
    c.resumed(opt);
    opt.resume = true;
    opt.save_dir = "runs/train/exp";
    opt.given = cli.given;
  }
  yolo::RuleInput in(cli, opt);
  in.world_size = c.world_size;
  in.world_size_text = c.world_size_env;
  in.under_launcher = !c.local_rank_env.empty();
  in.local_rank_env = c.local_rank_env;
  in.cuda_available = c.cuda;
  return yolo::first_broken_rule(in);
}

// The command line and the environment.
std::vector<Case> command_line_cases() {
  return {
      {"defaults", {}},
      {"quad", {"--quad"}},
      {"quad with batches rendered on the GPU",
       {"--quad", "--augment-device", "cuda"},
       1,
       "",
       "",
       true,
       "--quad: needs --augment-device cpu"},
      {"AutoBatch", {"--batch-size", "-1"}},
      {"AutoBatch under DDP",
       {"--batch-size", "-1"},
       2,
       "2",
       "0",
       false,
       "AutoBatch with --batch-size -1 is not compatible with YOLOv5 Multi-GPU DDP training"},
      {"evolve with resume",
       {"--evolve", "--resume"},
       1,
       "",
       "",
       false,
       "--evolve cannot be combined with --resume"},
      {"evolve with hyp-set",
       {"--evolve", "--hyp-set", "lr0=0.02"},
       1,
       "",
       "",
       false,
       "--hyp-set cannot be combined with --evolve"},
      {"evolve alone", {"--evolve", "3"}},
      {"evolve under torchrun",
       {"--evolve"},
       2,
       "2",
       "0",
       false,
       "--evolve runs on one process only (WORLD_SIZE=2)"},
      {"launcher with evolve",
       {"--nproc-per-node", "2", "--evolve"},
       2,
       "",
       "",
       false,
       "--nproc-per-node: cannot be used with --evolve"},
      {"launcher with local_rank",
       {"--nproc-per-node", "2", "--local_rank", "0"},
       1,
       "",
       "",
       false,
       "cannot be used with --local_rank"},
      {"launcher under torchrun",
       {"--nproc-per-node", "auto"},
       1,
       "",
       "1",
       false,
       "LOCAL_RANK=1 is set, so this process was started by torchrun"},
      {"launcher, batch splits", {"--nproc-per-node", "2", "--batch-size", "16"}, 2},
      {"launcher, batch does not split",
       {"--nproc-per-node", "1000", "--batch-size", "4"},
       1000,
       "",
       "",
       false,
       "--batch-size 4 must be multiple of WORLD_SIZE (1000)"},
      {"DDP batch",
       {"--batch-size", "15"},
       2,
       "2",
       "0",
       false,
       "--batch-size 15 must be multiple of WORLD_SIZE (2)"},
      {"DDP image weights",
       {"--image-weights"},
       2,
       "2",
       "0",
       false,
       "--image-weights is not compatible with YOLOv5 Multi-GPU DDP training"},
      {"image weights alone", {"--image-weights"}},
  };
}

// A --resume: the run's own opt.yaml against the command line.
std::vector<Case> resume_cases() {
  return {
      {"resume may change the device",
       {"--resume", "--device", "cpu", "--workers", "2"},
       1,
       "",
       "",
       false,
       "",
       [](yolo::Options& o) { o.epochs = 5; }},
      {"resume keeps the epochs",
       {"--resume", "--epochs", "9"},
       1,
       "",
       "",
       false,
       "--epochs cannot be changed when resuming (the run continues with the options in "
       "runs/train/exp/opt.yaml)",
       [](yolo::Options& o) { o.epochs = 5; }},
      {"resume checks the run's own values",
       {"--resume"},
       1,
       "",
       "",
       false,
       "--epochs: must be >= 1 (got -1) (from runs/train/exp/opt.yaml)",
       [](yolo::Options& o) { o.epochs = -1; }},
      {"resume of a DDP run on fewer ranks",
       {"--resume"},
       3,
       "3",
       "0",
       false,
       "must be multiple of WORLD_SIZE (3)",
       [](yolo::Options& o) { o.batch_size = 16; }},
  };
}

std::vector<Case> augment_cases() {
  return {
      {"augment on cuda with --device cpu",
       {"--device", "cpu", "--augment-device", "cuda"},
       1,
       "",
       "",
       true,
       "--augment-device cuda: training runs on cpu"},
      {"augment on cuda without a GPU",
       {"--augment-device", "cuda"},
       1,
       "",
       "",
       false,
       "--augment-device cuda: training runs on cpu"},
      {"augment on cuda with a GPU", {"--augment-device", "cuda"}, 1, "", "", true},
      {"augment on cuda from a resumed run falls back",
       {"--resume"},
       1,
       "",
       "",
       false,
       "",
       [](yolo::Options& o) { o.augment_device = "cuda"; }},
  };
}

TEST(TrainRules, EachRuleRefusesWhatItShouldAndOnlyThat) {
  std::vector<Case> cases = command_line_cases();
  for (auto more : {resume_cases(), augment_cases()})
    cases.insert(cases.end(), more.begin(), more.end());
  for (const Case& c : cases) {
    const std::string got = broken(c);
    if (c.expected.empty()) {
      EXPECT_EQ(got, "") << c.what;
    } else {
      EXPECT_NE(got.find(c.expected), std::string::npos) << c.what << ": got '" << got << "'";
    }
  }
}

// Every rule is in the table once, under its own name.
TEST(TrainRules, TableNamesEachRuleOnce) {
  std::vector<std::string> names;
  for (const auto& r : yolo::train_rules()) {
    for (const auto& n : names) EXPECT_NE(n, r.name);
    names.emplace_back(r.name);
  }
  EXPECT_GE(names.size(), 10u);
}

TEST(TrainRules, ResumeMayChangeOnlyWhatDiffersBetweenMachines) {
  for (const char* f : {"device", "workers", "memory-format", "augment-device", "local_rank",
                        "dist-backend", "dist-timeout", "nproc-per-node", "resume"}) {
    EXPECT_TRUE(yolo::may_change_on_resume(f)) << f;
  }
  for (const char* f : {"epochs", "batch-size", "data", "hyp", "cfg", "weights", "imgsz"}) {
    EXPECT_FALSE(yolo::may_change_on_resume(f)) << f;
  }
}

}  // namespace

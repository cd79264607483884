#pragma once
// Every rule of train's that involves more than one flag, a run's opt.yaml or the environment
// (torchrun's variables, the GPUs), in one table. Each flag's own values are checked as it is
// parsed (train_options.h); these run once, on the resolved configuration (train_config.h).
#include <string>
#include <vector>

#include "utils/engine/train_options.h"

namespace yolo {

class TrainConfig;

// What the rules look at.
struct RuleInput {
  RuleInput(const Options& command_line, const Options& resolved)
      : cli(command_line), opt(resolved) {}
  const Options& cli;  // the command line as given
  const Options& opt;  // resolved: a resume's own options, files as paths
  // Processes training together: WORLD_SIZE under torchrun, the --nproc-per-node count with the
  // built-in launcher, else 1.
  int world_size = 1;
  std::string world_size_text;  // WORLD_SIZE as set in the environment, "" when not
  bool under_launcher = false;  // LOCAL_RANK is set: torchrun (or a launcher) started us
  std::string local_rank_env;   // its value
  bool cuda_available = false;
};

struct TrainRule {
  const char* name;
  std::string (*broken)(const RuleInput& in);  // what is wrong (the UsageError's text), or ""
};

// The rules in the order they are checked.
const std::vector<TrainRule>& train_rules();

// The first broken rule's message, or "".
std::string first_broken_rule(const RuleInput& in);

// Reads the environment into a RuleInput for `cfg` and throws UsageError on the first broken rule.
void validate(const TrainConfig& cfg);

// The flags a --resume may give: those that may differ between machines.
bool may_change_on_resume(const std::string& flag);

}  // namespace yolo

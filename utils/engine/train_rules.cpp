#include "utils/engine/train_rules.h"

#include <torch/cuda.h>

#include <cstdlib>
#include <set>

#include "utils/core/errors.h"
#include "utils/distributed/distributed.h"
#include "utils/distributed/launcher.h"
#include "utils/engine/train_config.h"

namespace yolo {

namespace {

const std::string kNotDdp = " is not compatible with YOLOv5 Multi-GPU DDP training";

// Values from a resumed run's opt.yaml pass the same checks as the command line's.
std::string values_in_range(const RuleInput& in) {
  const std::string bad = bad_option_value(in.opt);
  if (bad.empty() || !in.opt.resume) return bad;
  return bad + " (from " + in.opt.save_dir + "/opt.yaml)";
}

// The quad collate works on rendered images, so not with batches rendered on the GPU.
std::string quad_on_the_cpu(const RuleInput& in) {
  if (!in.opt.quad || in.opt.augment_device != "cuda") return "";
  return "--quad: needs --augment-device cpu (the quad collate joins images the CPU rendered)";
}

std::string evolve_with_resume(const RuleInput& in) {
  return in.cli.evolve > 0 && in.cli.resume ? "--evolve cannot be combined with --resume" : "";
}

// Evolution mutates the --hyp file's values; fixed overrides would undo its mutations.
std::string evolve_with_hyp_set(const RuleInput& in) {
  return in.cli.evolve > 0 && !in.cli.hyp_set.empty()
             ? "--hyp-set cannot be combined with --evolve; put the values in the --hyp file"
             : "";
}

std::string evolve_on_one_process(const RuleInput& in) {
  if (in.cli.evolve == 0 || std::atoi(in.world_size_text.c_str()) <= 1) return "";
  return "--evolve runs on one process only (WORLD_SIZE=" + in.world_size_text +
         "); start it without torchrun";
}

std::string launcher_with_evolve(const RuleInput& in) {
  if (in.cli.nproc_per_node == 0 || in.cli.evolve == 0) return "";
  return "--nproc-per-node: cannot be used with --evolve (evolution trains one process at a time)";
}

std::string launcher_with_local_rank(const RuleInput& in) {
  if (in.cli.nproc_per_node == 0 || in.cli.local_rank == -1) return "";
  return "--nproc-per-node: cannot be used with --local_rank (the launcher sets each worker's "
         "rank)";
}

// The workers run without the flag; a process that sees it and LOCAL_RANK was started by one.
std::string launcher_under_launcher(const RuleInput& in) {
  if (in.cli.nproc_per_node == 0 || !in.under_launcher) return "";
  return "--nproc-per-node: LOCAL_RANK=" + in.local_rank_env +
         " is set, so this process was started by torchrun (or another launcher); use either "
         "torchrun or --nproc-per-node, not both";
}

std::string resume_keeps_the_run(const RuleInput& in) {
  if (!in.cli.resume) return "";
  for (const auto& flag : in.cli.given) {
    if (!may_change_on_resume(flag)) {
      return "--" + flag +
             " cannot be changed when resuming (the run continues with the options in " +
             in.opt.save_dir +
             "/opt.yaml); only --device, --workers, --memory-format, "
             "--augment-device and the distributed flags may be given";
    }
  }
  return "";
}

std::string ddp_image_weights(const RuleInput& in) {
  return in.world_size > 1 && in.opt.image_weights ? "--image-weights" + kNotDdp : "";
}

std::string ddp_evolve(const RuleInput& in) {
  return in.world_size > 1 && in.opt.evolve > 0 ? "--evolve" + kNotDdp : "";
}

std::string ddp_autobatch(const RuleInput& in) {
  if (in.world_size <= 1 || in.opt.batch_size != -1) return "";
  return "AutoBatch with --batch-size -1" + kNotDdp + ", please pass a valid --batch-size";
}

std::string ddp_batch_split(const RuleInput& in) {
  if (in.world_size <= 1 || in.opt.batch_size % in.world_size == 0) return "";
  return "--batch-size " + std::to_string(in.opt.batch_size) + " must be multiple of WORLD_SIZE (" +
         std::to_string(in.world_size) + ")";
}

// Given on the command line it must be honoured; from a resumed run's opt.yaml set-up falls back
// to the CPU with a warning.
std::string augment_device_needs_cuda(const RuleInput& in) {
  if (in.opt.augment_device != "cuda" || !in.opt.was_given("augment-device")) return "";
  const bool on_cpu = in.opt.device == "cpu" || (in.opt.device.empty() && !in.cuda_available);
  if (!on_cpu) return "";  // a CUDA --device that does not exist is select_device's to say
  return "--augment-device cuda: training runs on cpu; give a CUDA --device, or --augment-device "
         "cpu";
}

}  // namespace

bool may_change_on_resume(const std::string& flag) {
  static const std::set<std::string> kMayChange = {
      "resume",       "device",         "workers",       "local_rank",     "dist-backend",
      "dist-timeout", "nproc-per-node", "memory-format", "augment-device", "cache-dir"};
  return kMayChange.count(flag) > 0;
}

const std::vector<TrainRule>& train_rules() {
  static const std::vector<TrainRule> rules = {
      {"values in range", values_in_range},
      {"quad on the CPU", quad_on_the_cpu},
      {"evolve with resume", evolve_with_resume},
      {"evolve with hyp-set", evolve_with_hyp_set},
      {"evolve on one process", evolve_on_one_process},
      {"launcher with evolve", launcher_with_evolve},
      {"launcher with local_rank", launcher_with_local_rank},
      {"launcher under a launcher", launcher_under_launcher},
      {"resume keeps the run", resume_keeps_the_run},
      {"DDP without image weights", ddp_image_weights},
      {"DDP without evolve", ddp_evolve},
      {"DDP without AutoBatch", ddp_autobatch},
      {"DDP batch split", ddp_batch_split},
      {"augment device needs CUDA", augment_device_needs_cuda},
  };
  return rules;
}

std::string first_broken_rule(const RuleInput& in) {
  for (const TrainRule& r : train_rules()) {
    std::string what = r.broken(in);
    if (!what.empty()) return what;
  }
  return "";
}

void validate(const TrainConfig& cfg) {
  const Options& cli = cfg.command_line();
  RuleInput in(cli, cfg.opt());
  const char* ws = std::getenv("WORLD_SIZE");
  const char* lr = std::getenv("LOCAL_RANK");
  in.world_size_text = ws ? ws : "";
  in.under_launcher = lr != nullptr;
  in.local_rank_env = lr ? lr : "";
  in.cuda_available = torch::cuda::is_available();
  if (cli.nproc_per_node != 0) {
    // Checked here, before any worker starts: the workers would each find the same fault.
    if (!in.under_launcher && cli.local_rank == -1) {
      in.world_size = resolve_nproc(cli.nproc_per_node);
    }
  } else {
    const DistEnv env = read_dist_env(cfg.opt().local_rank);
    in.world_size = env.distributed() ? env.world_size : 1;
  }
  const std::string what = first_broken_rule(in);
  if (!what.empty()) throw UsageError(what);
}

}  // namespace yolo

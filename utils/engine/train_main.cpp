#include "utils/engine/train_main.h"

#include <c10/util/Exception.h>

#include <csignal>
#include <cstdlib>
#include <iostream>

#include "utils/core/errors.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/distributed/distributed.h"
#include "utils/distributed/launcher.h"
#include "utils/engine/evolve.h"
#include "utils/engine/train.h"
#include "utils/engine/train_config.h"
#include "utils/engine/train_options.h"
#include "yolo/train.h"

namespace yolo {

namespace {
// First Ctrl-C / SIGTERM: finish the step, save last.pt, exit non-zero. The same signal again
// kills. The other one is ignored: Ctrl-C on torchrun sends SIGINT from the terminal and then
// SIGTERM from torchrun to every worker, and that must still save.
extern "C" void on_stop_signal(int sig) {
  static volatile std::sig_atomic_t first = 0;
  if (first == sig) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  if (first != 0) return;
  first = sig;
  request_stop();
}

// Under torchrun, the error file lets torchrun report this rank's real error (not just an exit
// status).
void report_to_torchrun(const std::exception& e) {
  const char* file = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (!file || !*file) return;
  std::string type = "RuntimeError", what = e.what();
  if (dynamic_cast<const UsageError*>(&e)) type = "UsageError";
  if (dynamic_cast<const TrainingInterrupted*>(&e)) type = "TrainingInterrupted";
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) what = ce->what_without_backtrace();
  write_elastic_error_file(file, type, what);
}
}  // namespace

// parse -> resolve (which validates) -> dispatch: the launcher, evolution or one run. Each step is
// taken once in this process.
int train_main(int argc, char** argv) {
  const CommandLine args = parse_train_args(argc, argv);
  if (args.help) {
    std::cout << args.help_text;
    return 0;
  }
  if (args.version) {
    std::cout << version_report();
    return 0;
  }
  try {
    TrainConfig cfg = resolve(args.opt);
    // The workers parse the same command line (without --nproc-per-node) themselves.
    if (args.opt.nproc_per_node != 0) return run_launcher(args.opt.nproc_per_node, argc, argv);
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    if (cfg.opt().evolve > 0) {
      evolve(cfg);
    } else {
      train(TrainSettings(std::make_shared<const TrainConfig>(std::move(cfg))));
    }
  } catch (const std::exception& e) {
    report_to_torchrun(e);
    throw;
  }
  return 0;
}

}  // namespace yolo

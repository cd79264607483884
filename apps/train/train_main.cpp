#include "apps/train/train_main.h"

#include <csignal>
#include <iostream>

#include "apps/train/evolve.h"
#include "apps/train/trainer.h"
#include "utils/options.h"

namespace yolo {

namespace {
// First Ctrl-C / SIGTERM: finish the step, save last.pt, exit non-zero. A second one kills.
extern "C" void on_stop_signal(int sig) {
  static volatile std::sig_atomic_t seen = 0;
  if (seen) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  seen = 1;
  request_stop();
}
}  // namespace

int train_main(int argc, char** argv) {
  const ParsedTrainArgs args = parse_train_args(argc, argv);
  if (args.help) {
    std::cout << args.help_text;
    return 0;
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  if (args.opt.evolve > 0) {
    evolve(args.opt);
  } else {
    train(args.opt);
  }
  return 0;
}

}  // namespace yolo

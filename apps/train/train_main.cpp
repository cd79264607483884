#include "apps/train/train_main.h"

#include <iostream>

#include "apps/train/trainer.h"
#include "utils/options.h"

namespace yolo {

int train_main(int argc, char** argv) {
  const ParsedTrainArgs args = parse_train_args(argc, argv);
  if (args.help) {
    std::cout << args.help_text;
    return 0;
  }
  train(args.opt);
  return 0;
}

}  // namespace yolo

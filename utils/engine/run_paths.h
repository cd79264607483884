#pragma once
// Files of a training run: <project>/<name>/ and its weights/.
#include <string>

namespace yolo {

struct RunPaths {
  std::string save_dir, weights_dir, last, best;
  std::string results_csv() const { return save_dir + "/results.csv"; }
  std::string epoch_checkpoint(int epoch) const {
    return weights_dir + "/epoch" + std::to_string(epoch) + ".pt";
  }
};

}  // namespace yolo

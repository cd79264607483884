#pragma once
// YOLOv5 v7.0's hyperparameter evolution (train.py --evolve): each generation mutates the fittest
// of the best five rows of evolve.csv, trains with final-epoch-only validation and no saving, and
// appends its results; hyp_evolve.yaml holds the best hyperparameters, evolve.png their spread.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "utils/engine/hyp.h"
#include "utils/engine/train_config.h"

namespace yolo {

struct EvolveGene {
  std::string key;
  double gain, lower, upper;  // mutation scale (0 = fixed) and limits
};

// YOLOv5 v7.0's meta table. `anchors` (per output layer, rounded when the model is built) is
// evolved only with AutoAnchor on, as YOLOv5's; with --noautoanchor it keeps the model's anchors.
const std::vector<EvolveGene>& evolve_genes();

// One mutation of `parent` (values in evolve_genes() order), clipped to the limits and rounded to
// 5 decimals. Changes at least one gene with a non-zero gain.
std::vector<double> mutate(const std::vector<double>& parent, std::mt19937_64& rng);

// Picks the parent from evolve.csv rows (7 results, then genes): fitness-weighted among the 5 best,
// the fitness weighing mAP50 by `map50_weight` (the model family's: 0.1 YOLOv5, 0 anchor-free).
std::vector<double> select_parent(const std::vector<std::vector<double>>& rows,
                                  std::mt19937_64& rng, double map50_weight = 0.1);

// Runs cfg.opt().evolve generations, each trained with cfg.evolve_generation(); returns the
// evolve run dir.
std::string evolve(const TrainConfig& cfg);

}  // namespace yolo

#include "utils/engine/evolve.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "utils/core/io/results_csv.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/progress.h"
#include "utils/core/stopwatch.h"
#include "utils/core/yaml_io.h"
#include "utils/engine/train.h"
#include "utils/eval/metrics.h"
#include "utils/viz/plots.h"

namespace fs = std::filesystem;

namespace yolo {

const std::vector<EvolveGene>& evolve_genes() {
  static const std::vector<EvolveGene> genes = {{"lr0", 1, 1e-5, 1e-1},
                                                {"lrf", 1, 0.01, 1.0},
                                                {"momentum", 0.3, 0.6, 0.98},
                                                {"weight_decay", 1, 0.0, 0.001},
                                                {"warmup_epochs", 1, 0.0, 5.0},
                                                {"warmup_momentum", 1, 0.0, 0.95},
                                                {"warmup_bias_lr", 1, 0.0, 0.2},
                                                {"box", 1, 0.02, 0.2},
                                                {"cls", 1, 0.2, 4.0},
                                                {"cls_pw", 1, 0.5, 2.0},
                                                {"obj", 1, 0.2, 4.0},
                                                {"obj_pw", 1, 0.5, 2.0},
                                                {"iou_t", 0, 0.1, 0.7},
                                                {"anchor_t", 1, 2.0, 8.0},
                                                {"fl_gamma", 0, 0.0, 2.0},
                                                {"hsv_h", 1, 0.0, 0.1},
                                                {"hsv_s", 1, 0.0, 0.9},
                                                {"hsv_v", 1, 0.0, 0.9},
                                                {"degrees", 1, 0.0, 45.0},
                                                {"translate", 1, 0.0, 0.9},
                                                {"scale", 1, 0.0, 0.9},
                                                {"shear", 1, 0.0, 10.0},
                                                {"perspective", 0, 0.0, 0.001},
                                                {"flipud", 1, 0.0, 1.0},
                                                {"fliplr", 0, 0.0, 1.0},
                                                {"mosaic", 1, 0.0, 1.0},
                                                {"mixup", 1, 0.0, 1.0},
                                                {"copy_paste", 1, 0.0, 1.0}};
  return genes;
}

namespace {
double constrain(double v, const EvolveGene& g) {
  v = std::min(std::max(v, g.lower), g.upper);
  return std::round(v * 1e5) / 1e5;
}

double row_fitness(const std::vector<double>& r) { return fitness(r[2], r[3]); }
}  // namespace

std::vector<double> mutate(const std::vector<double>& parent, std::mt19937_64& rng) {
  const auto& genes = evolve_genes();
  const double mp = 0.8, sigma = 0.2;  // mutation probability and sigma, as YOLOv5
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(genes.size(), 1.0);
  for (int tries = 0;
       tries < 1000 && std::all_of(v.begin(), v.end(), [](double x) { return x == 1.0; });
       ++tries) {
    const double scale = u(rng);
    for (size_t i = 0; i < genes.size(); ++i) {
      const double hit = u(rng) < mp ? 1.0 : 0.0;
      v[i] = std::clamp(genes[i].gain * hit * normal(rng) * scale * sigma + 1, 0.3, 3.0);
    }
  }
  std::vector<double> child(genes.size());
  for (size_t i = 0; i < genes.size(); ++i) child[i] = constrain(parent[i] * v[i], genes[i]);
  return child;
}

std::vector<double> select_parent(const std::vector<std::vector<double>>& rows,
                                  std::mt19937_64& rng) {
  std::vector<std::vector<double>> top = rows;
  std::stable_sort(top.begin(), top.end(),
                   [](const auto& a, const auto& b) { return row_fitness(a) > row_fitness(b); });
  top.resize(std::min<size_t>(5, top.size()));
  double lo = row_fitness(top.back());
  std::vector<double> w;
  for (const auto& r : top) w.push_back(row_fitness(r) - lo + 1e-6);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  const auto& r = top[pick(rng)];
  return std::vector<double>(r.begin() + val_metric_columns().size(), r.end());
}

std::string evolve(const TrainConfig& cfg) {
  const Options& opt = cfg.opt();
  const std::string dir =
      increment_path((fs::path(opt.project) / opt.name).string(), opt.exist_ok, true);
  const fs::path evolve_csv = fs::path(dir) / "evolve.csv",
                 best_yaml = fs::path(dir) / "hyp_evolve.yaml";
  const auto& genes = evolve_genes();
  const Hyp base = load_hyp(opt.hyp);
  std::vector<double> start;
  for (const auto& g : genes) start.push_back(constrain(base.at(g.key), g));
  if (fs::exists(evolve_csv)) {
    log_info("Continuing evolution from " + evolve_csv.string() + " (" +
             std::to_string(read_results_csv(evolve_csv.string()).rows.size()) + " generations)");
  }
  const Stopwatch clock;
  for (int g = 0; g < opt.evolve; ++g) {
    std::vector<std::vector<double>> rows;
    if (fs::exists(evolve_csv)) rows = read_results_csv(evolve_csv.string()).rows;
    std::mt19937_64 rng(static_cast<uint64_t>(opt.seed) * 1000003ULL + rows.size());
    const std::vector<double> genome = rows.empty() ? start : mutate(select_parent(rows, rng), rng);
    Hyp hyp = base;
    for (size_t i = 0; i < genes.size(); ++i) hyp.set(genes[i].key, genome[i]);
    const std::string hyp_path = (fs::path(dir) / "hyp_generation.yaml").string();
    save_yaml_file(hyp_to_yaml(hyp), hyp_path);
    // Generation i/N with the elapsed time and, after the first, an ETA (the generations'
    // mean so far).
    log_info("\n" +
             format_progress("Evolve generation " + std::to_string(rows.size() + 1) + " (" +
                                 std::to_string(g + 1) + "/" + std::to_string(opt.evolve) + ")",
                             g, opt.evolve, clock.seconds()));
    const TrainSummary s = train(cfg.evolve_generation(hyp_path, dir));
    // Append: results then genes.
    std::vector<std::string> columns = val_metric_columns();
    for (const auto& gn : genes) columns.push_back(gn.key);
    std::vector<double> row(s.last_results.begin(), s.last_results.end());
    row.insert(row.end(), genome.begin(), genome.end());
    append_csv_row(evolve_csv.string(), columns, row);
    // The best generation so far becomes hyp_evolve.yaml.
    rows = read_results_csv(evolve_csv.string()).rows;
    const auto best = std::max_element(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return row_fitness(a) < row_fitness(b);
    });
    Hyp best_hyp = base;
    for (size_t i = 0; i < genes.size(); ++i)
      best_hyp.set(genes[i].key, (*best)[val_metric_columns().size() + i]);
    std::ofstream y(best_yaml);
    y << "# YOLOv5 C++ hyperparameter evolution results\n# Best generation: "
      << (best - rows.begin()) << "\n# Last generation: " << rows.size() - 1
      << "\n# Fitness (0.1 mAP50 + 0.9 mAP50-95): " << row_fitness(*best) << "\n\n"
      << yaml_dump(hyp_to_yaml(best_hyp));
  }
  plot_evolve(evolve_csv.string(), (fs::path(dir) / "evolve.png").string());
  log_info("Hyperparameter evolution finished " + std::to_string(opt.evolve) +
           " generations\nResults saved to " + dir + "\nUsage example: train --hyp " +
           best_yaml.string());
  return dir;
}

}  // namespace yolo

#include "utils/engine/evolve.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "utils/core/format.h"
#include "utils/core/io/results_csv.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/progress.h"
#include "utils/core/run_lock.h"
#include "utils/core/stopwatch.h"
#include "utils/core/yaml_io.h"
#include "utils/engine/train.h"
#include "utils/eval/metrics.h"
#include "utils/eval/model_family.h"
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
                                                {"anchors", 2, 2.0, 10.0},
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

double row_fitness(const std::vector<double>& r, double map50_weight) {
  return fitness(r[2], r[3], map50_weight);
}

// evolve.csv's rows as results then genes in evolve_genes() order, found by column name: a file
// written with fewer genes (an older trainer's) gets `start`'s value for the ones it lacks.
std::vector<std::vector<double>> gene_rows(const ResultsTable& t,
                                           const std::vector<double>& start) {
  const size_t nr = val_metric_columns().size();
  const auto& genes = evolve_genes();
  std::vector<std::vector<double>> rows;
  for (const auto& r : t.rows) {
    std::vector<double> row(r.begin(), r.begin() + static_cast<long>(std::min(nr, r.size())));
    for (size_t i = 0; i < genes.size(); ++i) {
      const auto c = std::find(t.columns.begin(), t.columns.end(), genes[i].key);
      const size_t k = static_cast<size_t>(c - t.columns.begin());
      row.push_back(c != t.columns.end() && k < r.size() ? r[k] : start[i]);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The hyperparameters of a genome. Without AutoAnchor the anchor count is not evolved (YOLOv5
// drops it): the model keeps its YAML's anchors.
Hyp genome_hyp(const Hyp& base, const std::vector<double>& genome, bool evolve_anchors) {
  Hyp hyp = base;
  const auto& genes = evolve_genes();
  for (size_t i = 0; i < genes.size(); ++i) {
    if (genes[i].key == "anchors" && !evolve_anchors) continue;
    hyp.set(genes[i].key, genome[i]);
  }
  return hyp;
}
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
                                  std::mt19937_64& rng, double map50_weight) {
  const auto fit = [&](const std::vector<double>& r) { return row_fitness(r, map50_weight); };
  std::vector<std::vector<double>> top = rows;
  std::stable_sort(top.begin(), top.end(),
                   [&](const auto& a, const auto& b) { return fit(a) > fit(b); });
  top.resize(std::min<size_t>(5, top.size()));
  double lo = fit(top.back());
  std::vector<double> w;
  for (const auto& r : top) w.push_back(fit(r) - lo + 1e-6);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  const auto& r = top[pick(rng)];
  return std::vector<double>(r.begin() + val_metric_columns().size(), r.end());
}

std::string evolve(const TrainConfig& cfg) {
  const Options& opt = cfg.opt();
  const std::string dir =
      increment_path((fs::path(opt.project) / opt.name).string(), opt.exist_ok, true);
  // Held for every generation (each trains in this folder) and the csv between them.
  const auto lock = RunLock::acquire(dir);
  const fs::path evolve_csv = fs::path(dir) / "evolve.csv",
                 best_yaml = fs::path(dir) / "hyp_evolve.yaml";
  const auto& genes = evolve_genes();
  const Hyp base = load_hyp(opt.hyp);
  const std::string model_yaml =
      cfg.model_yaml().empty() ? read_model_yaml(opt.cfg) : cfg.model_yaml();
  const ModelFamily& family = model_family(parse_model_spec_string(model_yaml, opt.cfg));
  const double w50 = family.fitness_map50;
  // A hyp file without `anchors` starts from 3 per level, as YOLOv5's evolution.
  const bool evolve_anchors = family.fits_anchors && !opt.noautoanchor;
  const size_t anchors_gene = static_cast<size_t>(
      std::find_if(genes.begin(), genes.end(), [](const auto& g) { return g.key == "anchors"; }) -
      genes.begin());
  std::vector<double> start;
  for (const auto& g : genes) {
    const bool unset = g.key == "anchors" && !base.has_anchors;
    start.push_back(constrain(unset ? 3.0 : base.at(g.key), g));
  }
  std::vector<std::string> columns = val_metric_columns(family.loss_names);
  for (const auto& gn : genes) columns.push_back(gn.key);
  if (fs::exists(evolve_csv)) {
    const ResultsTable old = read_results_csv(evolve_csv.string());
    if (old.columns != columns) {  // another trainer version's genes: rewritten in today's
      const std::string tmp = evolve_csv.string() + ".tmp";
      fs::remove(tmp);
      for (const auto& r : gene_rows(old, start)) append_csv_row(tmp, columns, r);
      fs::rename(tmp, evolve_csv);
      log_info(evolve_csv.string() + ": rewritten with this trainer's genes (missing ones from " +
               opt.hyp + ")");
    }
    log_info("Continuing evolution from " + evolve_csv.string() + " (" +
             std::to_string(read_results_csv(evolve_csv.string()).rows.size()) + " generations)");
  }
  const Stopwatch clock;
  for (int g = 0; g < opt.evolve; ++g) {
    std::vector<std::vector<double>> rows;
    if (fs::exists(evolve_csv)) rows = gene_rows(read_results_csv(evolve_csv.string()), start);
    std::mt19937_64 rng(static_cast<uint64_t>(opt.seed) * 1000003ULL + rows.size());
    std::vector<double> genome = rows.empty() ? start : mutate(select_parent(rows, rng, w50), rng);
    if (!evolve_anchors) genome[anchors_gene] = 0;  // recorded as 0: the model's own anchors
    const Hyp hyp = genome_hyp(base, genome, evolve_anchors);
    const std::string hyp_path = (fs::path(dir) / "hyp_generation.yaml").string();
    save_yaml_file(hyp_to_yaml(hyp), hyp_path);
    // Generation i/N with the elapsed time and, after the first, an ETA (the generations'
    // mean so far).
    log_info("\n" +
             format_progress("Evolve generation " + std::to_string(rows.size() + 1) + " (" +
                                 std::to_string(g + 1) + "/" + std::to_string(opt.evolve) + ")",
                             g, opt.evolve, clock.seconds()));
    // A stop ends the evolution, not just the generation: its last.pt holds a plain run, and the
    // evolution goes on from evolve.csv with the command said here.
    const auto stopped = [&] {
      return TrainingInterrupted(
          "hyperparameter evolution stopped during generation " + std::to_string(rows.size() + 1) +
          " (" + dir + "/evolve.csv holds the " + std::to_string(rows.size()) +
          " finished); continue it with the same command and --evolve " +
          std::to_string(opt.evolve - g) + " --project " + shell_word(opt.project) + " --name " +
          shell_word(fs::path(dir).filename().string()) + " --exist-ok");
    };
    // Asked for between two generations: train() starts each with a fresh request.
    if (stop_requested()) throw stopped();
    TrainSummary s;
    try {
      s = train(cfg.evolve_generation(hyp_path, dir));
    } catch (const TrainingInterrupted&) {
      throw stopped();
    }
    // Append: results then genes.
    std::vector<double> row(s.last_results.begin(), s.last_results.end());
    row.insert(row.end(), genome.begin(), genome.end());
    append_csv_row(evolve_csv.string(), columns, row);
    // The best generation so far becomes hyp_evolve.yaml.
    rows = gene_rows(read_results_csv(evolve_csv.string()), start);
    const auto best = std::max_element(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
      return row_fitness(a, w50) < row_fitness(b, w50);
    });
    const Hyp best_hyp =
        genome_hyp(base,
                   std::vector<double>(
                       best->begin() + static_cast<long>(val_metric_columns().size()), best->end()),
                   evolve_anchors);
    std::ofstream y(best_yaml);
    y << "# YOLOv5 C++ hyperparameter evolution results\n# Best generation: "
      << (best - rows.begin()) << "\n# Last generation: " << rows.size() - 1 << "\n# Fitness ("
      << w50 << " mAP50 + " << 1 - w50 << " mAP50-95): " << row_fitness(*best, w50) << "\n\n"
      << yaml_dump(hyp_to_yaml(best_hyp));
  }
  plot_evolve(evolve_csv.string(), (fs::path(dir) / "evolve.png").string());
  log_info("Hyperparameter evolution finished " + std::to_string(opt.evolve) +
           " generations\nResults saved to " + one_line(dir) + "\nUsage example: train --hyp " +
           shell_word(best_yaml.string()));
  return dir;
}

}  // namespace yolo

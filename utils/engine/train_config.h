#pragma once
// The second step of train's road: parse -> resolve -> validate -> dispatch (launcher, evolve or
// train). resolve() turns the command line into the configuration a run trains with, once per
// process: a --resume's own options merged from its opt.yaml, bare config names turned into paths,
// --weights read (the architecture taken from a YOLOv5 checkpoint without --cfg), then every rule
// across flags and the environment checked (train_rules.h). Nothing after it resolves again; a
// torchrun restart is the one re-entry, resolve_restart().
#include <memory>
#include <string>

#include "models/weights.h"
#include "utils/engine/train_options.h"

namespace yolo {

class TrainConfig {
 public:
  // The options in force: files resolved, a resume's own.
  const Options& opt() const { return opt_; }
  // The command line as given (what the launcher forwards and a restart re-resolves).
  const Options& command_line() const { return cli_; }
  // --weights as read by resolve; null when training from scratch or resuming.
  const std::shared_ptr<const WeightsFile>& weights() const { return weights_; }
  // The architecture of a YOLOv5 checkpoint given as --weights without --cfg (its model YAML
  // text); "" otherwise.
  const std::string& model_yaml() const { return model_yaml_; }
  // One generation of --evolve: this configuration with `hyp_path`, trained into `run_dir`
  // (reused), validating only the final epoch and saving nothing.
  TrainConfig evolve_generation(const std::string& hyp_path, const std::string& run_dir) const;

 private:
  TrainConfig() = default;
  friend TrainConfig resolve(const Options& command_line);
  friend TrainConfig resolve_restart(const Options& command_line, const std::string& last_pt);
  // Files resolved, --weights read and (unless `restart`) the rules checked.
  static TrainConfig build(const Options& command_line, Options opt, bool restart);

  Options cli_, opt_;
  std::shared_ptr<const WeightsFile> weights_;
  std::string model_yaml_;
};

// Resolves and validates train's command line. Throws UsageError for bad flags, missing files or
// rules broken; std::runtime_error for unreadable files.
TrainConfig resolve(const Options& command_line);

// After a torchrun restart (--max_restarts): the same command line, continued from the run's
// `last_pt`. Flags that --resume would refuse are accepted (the restart repeats the run's own
// command line).
TrainConfig resolve_restart(const Options& command_line, const std::string& last_pt);

// The most recent runs/**/last.pt (YOLOv5's get_latest_run); throws UsageError when none.
std::string latest_run(const std::string& search_dir = "runs");

}  // namespace yolo

// Training throughput in steady state: real training steps of train's own engine (loader, model,
// loss, backward, optimizer, EMA) on generated shapes data, with the time per phase, peak RSS and
// peak GPU memory, beside the plain-PyTorch forward+backward of the same network, threads and
// layout (scripts/bench_pytorch_yolov5n.py, when the build's Python has torch).
// Usage: bench_train [--cfg yolov5n.yaml] [--imgsz 320] [--batch 16] [--workers N] [--threads N]
//                    [--steps 20] [--warmup 5] [--images 256] [--device cpu] [--python PATH]
//                    [--memory-format auto|channels-last|contiguous] [--data loader|memory]
//                    [--timing host|sync|events]
//   --data memory: a few batches made by the loader before timing, fed again and again, so the
//                  step alone is measured (the copy to the device included).
//   --timing:      how phases are timed on CUDA: GPU time between events (default), a device
//                  synchronise at each phase boundary, or host time (what queues, not what runs).
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "data/shapes_dataset.h"
#include "utils/core/app_main.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/stopwatch.h"
#include "utils/engine/phase_clock.h"
#include "utils/engine/trainer.h"

#ifndef YOLO_DEFAULT_PYTHON
#define YOLO_DEFAULT_PYTHON "python3"
#endif

namespace fs = std::filesystem;

namespace {

struct BenchArgs {
  std::string cfg = "yolov5n.yaml", device = "cpu", python = YOLO_DEFAULT_PYTHON,
              memory_format = "auto", data = "loader", timing;
  int imgsz = 320, batch = 16, workers = -1, threads = 0, steps = 20, warmup = 5, images = 256;
};

BenchArgs parse_args(int argc, char** argv) {
  BenchArgs a;
  std::map<std::string, int*> ints = {{"--imgsz", &a.imgsz},     {"--batch", &a.batch},
                                      {"--workers", &a.workers}, {"--threads", &a.threads},
                                      {"--steps", &a.steps},     {"--warmup", &a.warmup},
                                      {"--images", &a.images}};
  std::map<std::string, std::string*> strings = {
      {"--cfg", &a.cfg},       {"--device", &a.device},
      {"--python", &a.python}, {"--memory-format", &a.memory_format},
      {"--data", &a.data},     {"--timing", &a.timing}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw yolo::UsageError(flag + ": expected a value (see the usage line)");
    const std::string v = argv[++i];
    if (ints.count(flag)) {
      try {
        *ints[flag] = std::stoi(v);
      } catch (const std::exception&) {
        throw yolo::UsageError(flag + ": expected an integer, got '" + v + "'");
      }
    } else if (strings.count(flag)) {
      *strings[flag] = v;
    } else {
      throw yolo::UsageError("unknown flag '" + flag +
                             "'; flags: --cfg --imgsz --batch --workers --threads --steps "
                             "--warmup --images --device --python --memory-format --data "
                             "--timing");
    }
  }
  if (a.steps < 1 || a.warmup < 0 || a.batch < 1 || a.images < a.batch || a.workers < -1) {
    throw yolo::UsageError(
        "need --steps >= 1, --warmup >= 0, --batch >= 1, --images >= --batch, --workers >= 0");
  }
  if (a.data != "loader" && a.data != "memory") {
    throw yolo::UsageError("--data: expected loader or memory, got '" + a.data + "'");
  }
  if (!a.timing.empty()) yolo::PhaseClock::parse(a.timing, "--timing");
  return a;
}

long peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;  // KiB on Linux
}

// Sums the per-phase time of the timed steps: the Trainer reports each epoch's running totals,
// so the timed share is the difference between the totals at the two ends (a new epoch starts
// from zero). At both ends the phase clock is flushed and the device drained, so queued GPU work
// is charged to the steps that queued it.
class StepTimer : public yolo::Callback {
 public:
  StepTimer(int warmup, int steps, yolo::Trainer& trainer, const c10::Device& device)
      : warmup_(warmup), steps_(steps), trainer_(trainer), device_(device) {}
  void on_train_batch_end(const yolo::BatchEvent& e) override {
    ++step_;
    if (step_ != warmup_ && step_ != warmup_ + steps_) return;
    trainer_.phase_clock().flush();
    yolo::cuda_synchronize(device_);
    if (step_ == warmup_) {  // the timed steps start after this one
      start_ = *e.timing;
      wall_.restart();
      yolo::cuda_reset_peak_memory(device_);
      return;
    }
    add(*e.timing);
    total_.seconds = wall_.seconds();
    yolo::request_stop();  // the Trainer stops after this step
  }
  // An epoch ends inside the timed steps: bank its share (its totals are complete here).
  void on_train_epoch_end(int, const yolo::EpochTiming& t) override {
    if (step_ < warmup_ || step_ >= warmup_ + steps_) return;
    add(t);
    start_ = {};
  }
  const yolo::EpochTiming& total() const { return total_; }

 private:
  void add(const yolo::EpochTiming& t) {
    total_.images += t.images - start_.images;
    total_.optimizer_steps += t.optimizer_steps - start_.optimizer_steps;
    total_.data += t.data - start_.data;
    total_.transfer += t.transfer - start_.transfer;
    total_.forward += t.forward - start_.forward;
    total_.loss += t.loss - start_.loss;
    total_.backward += t.backward - start_.backward;
    total_.sync += t.sync - start_.sync;
    total_.optimizer += t.optimizer - start_.optimizer;
  }
  int warmup_, steps_, step_ = 0;
  yolo::Trainer& trainer_;
  c10::Device device_;
  yolo::Stopwatch wall_;
  yolo::EpochTiming start_, total_;
};

// The shapes data, generated once per size under the system temp folder.
std::string make_data(const BenchArgs& a) {
  const fs::path root =
      fs::temp_directory_path() /
      ("yolo_bench_train_" + std::to_string(a.images) + "_" + std::to_string(a.imgsz));
  yolo::ShapesSpec spec;
  spec.train = a.images;
  spec.val = 4;
  spec.width = std::max(a.imgsz, 256);  // the generator draws shapes up to ~100 px
  yolo::ensure_shapes_dataset((root / "shapes").string(), spec);
  const fs::path yaml = root / "data.yaml";
  std::ofstream(yaml) << "path: " << (root / "shapes").string()
                      << "\ntrain: images/train\nval: images/val\n"
                         "names: [circle, rectangle, triangle]\n";
  return yaml.string();
}

// scripts/bench_pytorch_yolov5n.py's images/s on the same model, size, batch, threads and layout;
// -1 when it cannot run (no torch in that Python, or a model it does not know).
double reference_images_per_s(const BenchArgs& a, int threads, bool channels_last) {
  const std::string model = fs::path(a.cfg).stem().string();
  if (model != "yolov5n" && model != "yolov5s") return -1;
  const bool cuda = a.device != "cpu";
  const std::string cmd = "'" + a.python + "' '" + yolo::project_root() +
                          "/scripts/bench_pytorch_yolov5n.py' " + std::to_string(threads) +
                          " --model " + model + " --imgsz " + std::to_string(a.imgsz) +
                          " --batch " + std::to_string(a.batch) + " --device " +
                          (cuda ? "cuda --amp --iters 20" : "cpu") +
                          (channels_last ? " --channels-last" : "") + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  double ips = -1;
  char line[512];
  while (std::fgets(line, sizeof(line), p)) std::sscanf(line, "images/s: %lf", &ips);
  ::pclose(p);
  return ips;
}

const char* timing_name(yolo::PhaseClock::Mode m) {
  switch (m) {
    case yolo::PhaseClock::Mode::kEvents:
      return "GPU time between CUDA events";
    case yolo::PhaseClock::Mode::kSync:
      return "host time, device synchronised at each phase";
    default:
      return "host time";
  }
}

struct RunInfo {
  int threads = 0;
  bool channels_last = false, amp = false;
  yolo::PhaseClock::Mode timing = yolo::PhaseClock::Mode::kHost;
  c10::Device device = c10::kCPU;
};

void report(const BenchArgs& a, const yolo::EpochTiming& t, const RunInfo& r) {
  const double s = std::max(t.seconds, 1e-9);
  std::printf(
      "\nbench_train: %s, %d px, batch %d, workers %d, %d threads, %s%s, %s, data %s, LibTorch "
      "%s\n",
      a.cfg.c_str(), a.imgsz, a.batch, a.workers, r.threads, a.device.c_str(), r.amp ? " AMP" : "",
      r.channels_last ? "channels-last" : "contiguous", a.data.c_str(), TORCH_VERSION);
  std::printf("%d steps after %d warm-up: %lld images in %.2f s = %.1f images/s\n", a.steps,
              a.warmup, static_cast<long long>(t.images), s, t.images / s);
  std::printf("phases (%s; data wait is host time):\n", timing_name(r.timing));
  // YOLOv5's warmup (the first max(3 epochs, 100) batches) steps the optimizer more often than
  // the nominal batch of 64 does later, so short runs at small batches overstate optimizer+EMA.
  const double other =
      s - t.data - t.transfer - t.forward - t.loss - t.backward - t.sync - t.optimizer;
  const std::pair<const char*, double> phases[] = {
      {"data wait", t.data},          {"to device", t.transfer},
      {"forward", t.forward},         {"loss", t.loss},
      {"backward", t.backward},       {"grad sync", t.sync},
      {"optimizer+EMA", t.optimizer}, {"other", other}};
  for (const auto& [name, v] : phases) {
    std::printf("  %-14s %8.3f s %6.1f %%\n", name, v, 100.0 * v / s);
  }
  if (t.optimizer_steps > 0) {
    std::printf("optimizer+EMA+scaler: %.2f ms per optimizer step (%lld steps)\n",
                1000.0 * t.optimizer / t.optimizer_steps,
                static_cast<long long>(t.optimizer_steps));
  }
  std::printf("peak RSS: %ld MiB\n", peak_rss_mib());
  if (r.device.is_cuda()) {
    std::printf("peak GPU memory allocated: %.2f GiB\n", yolo::cuda_peak_allocated_gib(r.device));
  }
  const double compute = t.forward + t.loss + t.backward;
  const double ours = t.images / std::max(compute, 1e-9);
  const double ref = reference_images_per_s(a, r.threads, r.channels_last);
  if (ref > 0) {
    std::printf(
        "forward+loss+backward: %.1f images/s; plain PyTorch forward+backward (same layout%s): "
        "%.1f images/s; ours/reference: %.2f\n",
        ours, r.amp ? ", AMP" : "", ref, ours / ref);
    std::printf("whole step: %.1f images/s; ours/reference: %.2f\n", t.images / s,
                t.images / s / ref);
  } else {
    std::printf(
        "forward+loss+backward: %.1f images/s; plain-PyTorch reference: not run (no torch in %s, "
        "or a model other than yolov5n/yolov5s)\n",
        ours, a.python.c_str());
  }
}

// --data memory: a few batches from the loader, made before the clock starts and fed in turn,
// as many per epoch as the loader would give (so epochs end, and the loss is read, as in train).
std::function<std::optional<yolo::Batch>()> memory_batches(yolo::DataLoader& loader) {
  auto batches = std::make_shared<std::vector<yolo::Batch>>();
  loader.start_epoch(0);
  for (int k = 0; k < 4; ++k) {
    std::optional<yolo::Batch> b = loader.next();
    if (!b) break;
    batches->push_back(std::move(*b));
  }
  loader.stop();
  if (batches->empty()) throw std::runtime_error("bench_train: the loader gave no batch");
  const size_t per_epoch = loader.num_batches();
  auto next = std::make_shared<size_t>(0);
  return [batches, next, per_epoch]() -> std::optional<yolo::Batch> {
    const size_t k = (*next)++;
    if (k == per_epoch) {  // the epoch's end; the next call starts another
      *next = 0;
      return std::nullopt;
    }
    return (*batches)[k % batches->size()];
  };
}

}  // namespace

int main(int argc, char** argv) {
  return yolo::run_app("bench_train", [&] {
    BenchArgs a = parse_args(argc, argv);
    // As train: --threads acts as OMP_NUM_THREADS, --workers as given on train's command line.
    if (a.threads > 0) ::setenv("OMP_NUM_THREADS", std::to_string(a.threads).c_str(), 1);
    yolo::Options o;
    o.cfg = a.cfg;
    o.data = make_data(a);
    o.imgsz = a.imgsz;
    o.batch_size = a.batch;
    if (a.workers >= 0) {
      o.workers = a.workers;
      o.given.push_back("workers");
    }
    o.device = a.device;
    o.memory_format = a.memory_format;
    o.epochs = 1000;  // stopped after the timed steps
    o.noval = o.noplots = o.nosave = true;
    o.project =
        (fs::temp_directory_path() / ("yolo_bench_runs_" + std::to_string(::getpid()))).string();
    yolo::set_log_enabled(false);
    yolo::TrainSetup setup = yolo::set_up_training(yolo::resolve(o));
    RunInfo r;
    r.threads = at::get_num_threads();
    r.channels_last = setup.channels_last;  // the layout train chose for these flags
    r.amp = setup.amp;
    r.device = setup.dev.device;
    r.timing = a.timing.empty() ? yolo::PhaseClock::default_mode(r.device)
                                : yolo::PhaseClock::parse(a.timing, "--timing");
    if (!r.device.is_cuda()) r.timing = yolo::PhaseClock::Mode::kHost;
    a.workers = setup.train_loader->workers();
    if (a.data == "memory") setup.batch_source = memory_batches(*setup.train_loader);
    yolo::Trainer trainer(std::move(setup), r.timing);
    auto timer = std::make_unique<StepTimer>(a.warmup, a.steps, trainer, r.device);
    const StepTimer& steps = *timer;
    trainer.add_callback(std::move(timer));
    try {
      trainer.fit();
    } catch (const yolo::TrainingInterrupted&) {
    }
    fs::remove_all(o.project);
    yolo::set_log_enabled(true);
    report(a, steps.total(), r);
    return 0;
  });
}

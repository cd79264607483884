// Training throughput in steady state: real training steps of train's own engine (loader, model,
// loss, backward, optimizer, EMA) on generated shapes data, with the time per phase and peak RSS,
// beside the plain-PyTorch forward+backward of the same network on the same threads
// (scripts/bench_pytorch_yolov5n.py, when the build's Python has torch).
// Usage: bench_train [--cfg yolov5n.yaml] [--imgsz 320] [--batch 16] [--workers N] [--threads N]
//                    [--steps 20] [--warmup 5] [--images 256] [--device cpu] [--python PATH]
//                    [--memory-format auto|channels-last|contiguous]
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "data/shapes_dataset.h"
#include "utils/core/app_main.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/stopwatch.h"
#include "utils/engine/trainer.h"

#ifndef YOLO_DEFAULT_PYTHON
#define YOLO_DEFAULT_PYTHON "python3"
#endif

namespace fs = std::filesystem;

namespace {

struct BenchArgs {
  std::string cfg = "yolov5n.yaml", device = "cpu", python = YOLO_DEFAULT_PYTHON,
              memory_format = "auto";
  int imgsz = 320, batch = 16, workers = -1, threads = 0, steps = 20, warmup = 5, images = 256;
};

BenchArgs parse_args(int argc, char** argv) {
  BenchArgs a;
  std::map<std::string, int*> ints = {{"--imgsz", &a.imgsz},     {"--batch", &a.batch},
                                      {"--workers", &a.workers}, {"--threads", &a.threads},
                                      {"--steps", &a.steps},     {"--warmup", &a.warmup},
                                      {"--images", &a.images}};
  std::map<std::string, std::string*> strings = {{"--cfg", &a.cfg},
                                                 {"--device", &a.device},
                                                 {"--python", &a.python},
                                                 {"--memory-format", &a.memory_format}};
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
                             "--warmup --images --device --python --memory-format");
    }
  }
  if (a.steps < 1 || a.warmup < 0 || a.batch < 1 || a.images < a.batch || a.workers < -1) {
    throw yolo::UsageError(
        "need --steps >= 1, --warmup >= 0, --batch >= 1, --images >= --batch, --workers >= 0");
  }
  return a;
}

long peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;  // KiB on Linux
}

// Sums the per-phase time of the timed steps: the Trainer reports each epoch's running totals,
// so a step's share is the difference from the previous batch (a new epoch starts from zero).
class PhaseClock : public yolo::Callback {
 public:
  PhaseClock(int warmup, int steps) : warmup_(warmup), steps_(steps) {}
  void on_train_batch_end(const yolo::BatchEvent& e) override {
    const yolo::EpochTiming& t = *e.timing;
    if (t.images < last_.images) last_ = {};  // a new epoch
    ++step_;
    if (step_ == warmup_) wall_.restart();
    if (step_ > warmup_) {
      total_.images += t.images - last_.images;
      total_.data += t.data - last_.data;
      total_.forward += t.forward - last_.forward;
      total_.loss += t.loss - last_.loss;
      total_.backward += t.backward - last_.backward;
      total_.sync += t.sync - last_.sync;
      total_.optimizer += t.optimizer - last_.optimizer;
    }
    last_ = t;
    if (step_ == warmup_ + steps_) {
      total_.seconds = wall_.seconds();
      yolo::request_stop();  // the Trainer stops after this step
    }
  }
  const yolo::EpochTiming& total() const { return total_; }

 private:
  int warmup_, steps_, step_ = 0;
  yolo::Stopwatch wall_;
  yolo::EpochTiming last_, total_;
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
  const std::string cmd =
      "'" + a.python + "' '" + yolo::project_root() + "/scripts/bench_pytorch_yolov5n.py' " +
      std::to_string(threads) + " --model " + model + " --imgsz " + std::to_string(a.imgsz) +
      " --batch " + std::to_string(a.batch) + " --device " + (a.device == "cpu" ? "cpu" : "cuda") +
      (channels_last ? " --channels-last" : "") + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  double ips = -1;
  char line[512];
  while (std::fgets(line, sizeof(line), p)) std::sscanf(line, "images/s: %lf", &ips);
  ::pclose(p);
  return ips;
}

void report(const BenchArgs& a, const yolo::EpochTiming& t, int threads, bool channels_last) {
  const double s = std::max(t.seconds, 1e-9);
  std::printf("\nbench_train: %s, %d px, batch %d, workers %d, %d threads, %s, %s, LibTorch %s\n",
              a.cfg.c_str(), a.imgsz, a.batch, a.workers, threads, a.device.c_str(),
              channels_last ? "channels-last" : "contiguous", TORCH_VERSION);
  std::printf("%d steps after %d warm-up: %lld images in %.2f s = %.1f images/s\n", a.steps,
              a.warmup, static_cast<long long>(t.images), s, t.images / s);
  // YOLOv5's warmup (the first max(3 epochs, 100) batches) steps the optimizer more often than
  // the nominal batch of 64 does later, so short runs overstate optimizer+EMA.
  const double other = s - t.data - t.forward - t.loss - t.backward - t.sync - t.optimizer;
  const std::pair<const char*, double> phases[] = {
      {"data wait", t.data},    {"forward", t.forward}, {"loss", t.loss},
      {"backward", t.backward}, {"grad sync", t.sync},  {"optimizer+EMA", t.optimizer},
      {"other", other}};
  for (const auto& [name, v] : phases) {
    std::printf("  %-14s %8.3f s %6.1f %%\n", name, v, 100.0 * v / s);
  }
  std::printf("peak RSS: %ld MiB\n", peak_rss_mib());
  const double compute = t.forward + t.loss + t.backward;
  const double ours = t.images / std::max(compute, 1e-9);
  const double ref = reference_images_per_s(a, threads, channels_last);
  if (ref > 0) {
    std::printf(
        "forward+loss+backward: %.1f images/s; plain PyTorch forward+backward: %.1f images/s "
        "(ours takes %.2fx its time)\n",
        ours, ref, ref / ours);
  } else {
    std::printf(
        "forward+loss+backward: %.1f images/s; plain-PyTorch reference: not run (no torch in %s, "
        "or a model other than yolov5n/yolov5s)\n",
        ours, a.python.c_str());
  }
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
    yolo::TrainSetup setup = yolo::set_up_training(o);
    const int threads = at::get_num_threads();
    a.workers = setup.train_loader->workers();
    const bool channels_last = setup.channels_last;  // the layout train chose for these flags
    yolo::Trainer trainer(std::move(setup));
    auto clock = std::make_unique<PhaseClock>(a.warmup, a.steps);
    const PhaseClock& phases = *clock;
    trainer.add_callback(std::move(clock));
    try {
      trainer.fit();
    } catch (const yolo::TrainingInterrupted&) {
    }
    fs::remove_all(o.project);
    yolo::set_log_enabled(true);
    report(a, phases.total(), threads, channels_last);
    return 0;
  });
}

// Loader throughput: mosaic training batches (hyp.scratch-low augmentation) at imgsz 640 and
// 320 with 1 and 2 workers, in images/s, plus peak RSS.
// Usage: bench_loader [DATASET_ROOT] [--epochs N] [--batch N] [--nc N]
// DATASET_ROOT holds images/train2017 (or images/) with YOLO labels; default: the shared coco128.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include "data/loader.h"
#include "utils/core/log.h"
#include "utils/core/stopwatch.h"

namespace fs = std::filesystem;

namespace {

long peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;  // KiB on Linux
}

int usage(const char* why) {
  std::cerr << "bench_loader: " << why
            << "\nusage: bench_loader [DATASET_ROOT] [--epochs N] [--batch N] [--nc N]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string root = "/work/shared/datasets/coco128";
  int epochs = 2, batch = 16, nc = 80;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](int& out) {
      if (i + 1 >= argc) return false;
      try {
        out = std::stoi(argv[++i]);
      } catch (const std::exception&) {
        return false;
      }
      return out > 0;
    };
    if (a == "--epochs") {
      if (!value(epochs)) return usage("--epochs needs a positive integer");
    } else if (a == "--batch") {
      if (!value(batch)) return usage("--batch needs a positive integer");
    } else if (a == "--nc") {
      if (!value(nc)) return usage("--nc needs a positive integer");
    } else if (a == "-h" || a == "--help") {
      usage("loader throughput benchmark");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown flag " + a).c_str());
    } else {
      root = a;
    }
  }
  std::string source = root + "/images/train2017";
  if (!fs::is_directory(source)) source = root + "/images";
  if (!fs::is_directory(source)) {
    std::cerr << "bench_loader: " << root << " has no images/train2017 or images/ folder\n";
    return 1;
  }
  try {
    std::printf("dataset %s, batch %d, %d epoch(s) per run, %u hardware threads\n", source.c_str(),
                batch, epochs, std::thread::hardware_concurrency());
    for (int imgsz : {640, 320}) {
      yolo::DatasetOptions opt;
      opt.imgsz = imgsz;
      opt.batch_size = batch;
      opt.augment = true;  // mosaic 1.0, scale 0.5, translate 0.1, HSV, fliplr
      opt.nc = nc;
      auto ds = std::make_shared<yolo::YoloDataset>(std::vector<std::string>{source}, opt);
      yolo::set_log_enabled(false);  // the label summary once is enough
      for (int workers : {1, 2}) {
        yolo::LoaderOptions lo;
        lo.batch_size = batch;
        lo.workers = workers;
        yolo::DataLoader loader(ds, lo);
        size_t images = 0;
        const yolo::Stopwatch t0;
        for (int e = 0; e < epochs; ++e) {
          loader.start_epoch(e);
          while (auto b = loader.next()) images += static_cast<size_t>(b->images.size(0));
        }
        const double s = t0.seconds();
        std::printf(
            "imgsz %4d  workers %d (used %d)  %6zu images  %7.2f s  %8.1f images/s  "
            "peak RSS %ld MiB\n",
            imgsz, workers, loader.workers(), images, s, images / s, peak_rss_mib());
        std::fflush(stdout);
      }
      yolo::set_log_enabled(true);
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_loader: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// Data set-up cost on generated shapes data: the first label scan (every image decoded and every
// label checked, labels/train.cache written), the cache reload, and how both grow with the number
// of images; then mosaic loader throughput (hyp.scratch-low, as train) with 1 and 2 workers.
// Usage: bench_data [--sizes 1000,10000,50000] [--width 160] [--root DIR] [--batch 16]
//                   [--loader-imgsz 640] [--loader-batches 40] [--loader-workers 1,2]
//                   [--loader-images 1000] [--loader-width W]
// The sets are generated once under --root (default: the temp folder) and reused; 50,000 images
// 160 px wide take about 1.6 GB. Their files are then in the page cache, so the scan measures
// decoding and checking, not disk reads.
//
// With --images SRC only the loader is timed, on JPEGs: SRC is a YOLO dataset folder
// (images/<split>, labels/<split>), copied to --root/jpeg_<name> so that no label cache is written
// into SRC (which may be read-only), or `generate` for shapes re-encoded as JPEGs 3:4 high in
// --root/jpeg_generated_<count>_w<width>. Each cache mode (none: no decoded images kept; bounded:
// the default cache; ram: --cache ram; disk: --cache disk's files alone, written by the first
// construction) runs with each --loader-workers count: the dataset's
// construction, the first batch and the steady batches after it are reported apart.
//   [--images SRC|generate] [--images-count 128] [--images-width 640] [--images-batch 64]
//   [--images-batches 8] [--images-caches none,bounded,ram,disk] [--images-recipes 0|1]
//   (and --loader-imgsz, --loader-workers). --images-recipes 1 times the loader as
//   --augment-device cuda uses it: workers decode and draw, the device would render.
// --images-batches 0 only prepares the folder and its label cache.
#include <ATen/Parallel.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "data/file_lists.h"
#include "data/label_cache.h"
#include "data/loader.h"
#include "data/shapes_dataset.h"
#include "utils/core/app_main.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/stopwatch.h"
#include "utils/engine/cpu_resources.h"
#include "utils/engine/hyp.h"

namespace fs = std::filesystem;

namespace {

constexpr int kNc = 3;       // the shapes classes
constexpr int kCocoNc = 80;  // --images: COCO's class ids (the shapes' 0-2 fit too)

// What the loader keeps of decoded images: nothing, the default bounded cache, --cache ram, or
// --cache disk (read from its files each time: no bounded cache beside it).
enum class CacheMode { kNone, kBounded, kRam, kDisk };
const char* const kCacheNames[] = {"none", "bounded", "ram", "disk"};

struct BenchArgs {
  std::vector<int> sizes = {1000, 10000, 50000};
  std::vector<int> loader_workers = {1, 2};
  std::string root = (fs::temp_directory_path() / "yolo_bench_data").string();
  int width = 160, batch = 16;
  int loader_imgsz = 640, loader_batches = 40, loader_images = 1000, loader_width = 0;
  std::string images;  // --images: a dataset folder or "generate"; empty: the shapes phases
  int images_count = 128, images_width = 640, images_batch = 64, images_batches = 8;
  int images_recipes = 0;  // 1: batches as recipes (--augment-device cuda): decode + draws only
  std::vector<CacheMode> caches = {CacheMode::kNone, CacheMode::kBounded, CacheMode::kRam};
};

const char* const kFlags =
    "--sizes --width --root --batch --loader-imgsz --loader-batches --loader-workers "
    "--loader-images --loader-width --images --images-count --images-width --images-batch "
    "--images-batches --images-caches --images-recipes";

// The whole of `v` as an int; false when it is not one.
bool to_int(const std::string& v, int& n) {
  size_t used = 0;
  try {
    n = std::stoi(v, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used != 0 && used == v.size();
}

std::vector<int> parse_list(const std::string& flag, const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) {
    int n = 0;
    if (!to_int(item, n) || n < 1) {
      throw yolo::UsageError(flag + ": expected positive integers separated by commas, got '" + v +
                             "'");
    }
    out.push_back(n);
  }
  if (out.empty()) throw yolo::UsageError(flag + ": expected at least one value");
  return out;
}

std::vector<CacheMode> parse_caches(const std::string& flag, const std::string& v) {
  std::vector<CacheMode> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto* end = std::end(kCacheNames);
    const auto* it = std::find(std::begin(kCacheNames), end, item);
    if (it == end) {
      throw yolo::UsageError(
          flag + ": expected none, bounded, ram or disk separated by commas, got '" + v + "'");
    }
    out.push_back(static_cast<CacheMode>(it - std::begin(kCacheNames)));
  }
  if (out.empty()) throw yolo::UsageError(flag + ": expected at least one cache mode");
  return out;
}

int parse_int(const std::string& flag, const std::string& v) {
  int n = 0;
  if (!to_int(v, n)) {
    throw yolo::UsageError(flag + ": expected an integer, got '" + v + "'");
  }
  return n;
}

void check_args(const BenchArgs& a) {
  // The generator draws shapes up to 90 px wide and misbehaves on images narrower than ~128 px.
  for (const auto& [flag, width] :
       {std::pair{"--width", a.width}, {"--loader-width", a.loader_width}}) {
    if (width < 160) {
      throw yolo::UsageError(std::string(flag) + ": must be at least 160 (pixels), got " +
                             std::to_string(width));
    }
  }
  if (a.batch < 1) throw yolo::UsageError("--batch: must be at least 1");
  if (a.loader_imgsz < 32 || a.loader_imgsz % 32 != 0) {
    throw yolo::UsageError("--loader-imgsz: must be a positive multiple of 32, got " +
                           std::to_string(a.loader_imgsz));
  }
  if (a.loader_batches < 0) {
    throw yolo::UsageError("--loader-batches: must be at least 0 (0 skips the loader phase)");
  }
  if (a.loader_images < a.batch) {
    throw yolo::UsageError("--loader-images: must be at least --batch (" + std::to_string(a.batch) +
                           ")");
  }
  if (a.root.empty()) throw yolo::UsageError("--root: expected a folder");
  if (a.images.empty()) return;
  if (a.images != "generate" && !fs::is_directory(a.images)) {
    throw yolo::UsageError("--images: expected a dataset folder or 'generate', got '" + a.images +
                           "' (no such folder)");
  }
  if (a.images_count < 1) throw yolo::UsageError("--images-count: must be at least 1");
  if (a.images_width < 160) {
    throw yolo::UsageError("--images-width: must be at least 160 (pixels), got " +
                           std::to_string(a.images_width));
  }
  if (a.images_batch < 1) throw yolo::UsageError("--images-batch: must be at least 1");
  if (a.images_batches < 0) {
    throw yolo::UsageError("--images-batches: must be at least 0 (0 only prepares the folder)");
  }
  if (a.images_recipes != 0 && a.images_recipes != 1) {
    throw yolo::UsageError("--images-recipes: expected 0 or 1");
  }
}

BenchArgs parse_args(int argc, char** argv) {
  BenchArgs a;
  std::map<std::string, int*> ints = {{"--width", &a.width},
                                      {"--batch", &a.batch},
                                      {"--loader-imgsz", &a.loader_imgsz},
                                      {"--loader-batches", &a.loader_batches},
                                      {"--loader-images", &a.loader_images},
                                      {"--loader-width", &a.loader_width}};
  ints.insert({{"--images-count", &a.images_count},
               {"--images-width", &a.images_width},
               {"--images-batch", &a.images_batch},
               {"--images-batches", &a.images_batches},
               {"--images-recipes", &a.images_recipes}});
  std::map<std::string, std::vector<int>*> lists = {{"--sizes", &a.sizes},
                                                    {"--loader-workers", &a.loader_workers}};
  std::map<std::string, std::string*> strings = {{"--root", &a.root}, {"--images", &a.images}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (!ints.count(flag) && !lists.count(flag) && !strings.count(flag) &&
        flag != "--images-caches") {
      throw yolo::UsageError("unknown flag '" + flag + "'; flags: " + kFlags);
    }
    if (i + 1 >= argc) throw yolo::UsageError(flag + ": expected a value (see the usage line)");
    const std::string v = argv[++i];
    if (ints.count(flag)) {
      *ints[flag] = parse_int(flag, v);
    } else if (lists.count(flag)) {
      *lists[flag] = parse_list(flag, v);
    } else if (strings.count(flag)) {
      if (v.empty()) throw yolo::UsageError(flag + ": expected a non-empty value");
      *strings[flag] = v;
    } else {
      a.caches = parse_caches(flag, v);
    }
  }
  // By default the loader reads images about as wide as its input size, as COCO's at 640 px, so
  // their decoding costs what it would in training.
  if (a.loader_width == 0) a.loader_width = std::max(a.loader_imgsz, 160);
  std::sort(a.sizes.begin(), a.sizes.end());
  a.sizes.erase(std::unique(a.sizes.begin(), a.sizes.end()), a.sizes.end());
  check_args(a);
  return a;
}

// /proc/self/status field in KiB (VmRSS, VmHWM), or -1.
long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// What a measuring child sends back (plain bytes through a pipe).
struct Measure {
  double seconds = 0;
  long rss_before_kib = 0, peak_kib = 0;
  long count = 0;        // images (or batches' images) handled
  double parts[8] = {};  // phase-specific extra figures
  char error[512] = {};  // the child's exception, if any
};

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

template <typename Fn>
void timed(Measure& m, Fn fn) {
  reset_peak_rss();
  m.rss_before_kib = status_kib("VmRSS");
  const yolo::Stopwatch t;
  fn();
  m.seconds = t.seconds();
  m.peak_kib = status_kib("VmHWM");
}

// Each figure is measured in a child forked for it, so every phase has its own peak RSS and
// starts from the same small heap, unaffected by what earlier phases left allocated or
// fragmented. The parent only parses flags and prints: it starts no threads (OpenCV, OpenMP and
// the loader's run in the children), so forking it is safe. Within the child the peak is reset
// just before the timed work (clear_refs 5), so growth = VmHWM after - VmRSS before; where the
// reset is refused the child's peak starts at the parent's, which is about its start-up RSS.
template <typename Fn>
Measure in_child(Fn fn) {
  std::cout.flush();
  std::fflush(nullptr);  // a forked child would print the parent's buffered output again
  int fd[2];
  if (pipe(fd) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(fd[0]);
    Measure m;
    try {
      yolo::set_log_enabled(false);  // the parent prints; the scan's summary would interleave
      m = fn();
    } catch (const std::exception& e) {
      std::snprintf(m.error, sizeof m.error, "%s", e.what());
    }
    const ssize_t n = write(fd[1], &m, sizeof m);  // under PIPE_BUF: one atomic write
    _exit(n == static_cast<ssize_t>(sizeof m) && !m.error[0] ? 0 : 1);  // skip static destructors
  }
  close(fd[1]);
  Measure m;
  ssize_t got = 0;
  for (ssize_t n; got < static_cast<ssize_t>(sizeof m) &&
                  (n = read(fd[0], reinterpret_cast<char*>(&m) + got, sizeof m - got)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    got += n;
  }
  close(fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof m)) {
    throw std::runtime_error(WIFSIGNALED(status)
                                 ? "the measuring process was killed by signal " +
                                       std::to_string(WTERMSIG(status)) + " (out of memory?)"
                                 : "the measuring process ended without a result (exit " +
                                       std::to_string(WEXITSTATUS(status)) + ")");
  }
  if (m.error[0]) throw std::runtime_error(m.error);
  return m;
}

// A generated set, made once and reused: images/train and labels/train (and one val image).
struct ShapesSet {
  fs::path root;
  int images = 0, width = 0;
  std::string images_dir() const { return (root / "images" / "train").string(); }
  fs::path cache() const { return root / "labels" / "train.cache"; }
};

ShapesSet shapes_set(const BenchArgs& a, int images, int width) {
  return {fs::path(a.root) / ("shapes_" + std::to_string(images) + "_w" + std::to_string(width)),
          images, width};
}

void generate(const ShapesSet& set) {
  if (fs::exists(set.root)) {
    std::printf("  data: %s (reused)\n", set.root.string().c_str());
    return;
  }
  const Measure m = in_child([&] {
    Measure r;
    yolo::ShapesSpec spec;
    spec.train = set.images;
    spec.val = 1;
    spec.width = set.width;
    timed(r, [&] { yolo::ensure_shapes_dataset(set.root.string(), spec); });
    return r;
  });
  std::printf("  data: %s generated in %.1f s (%.0f images/s; not part of any figure below)\n",
              set.root.string().c_str(), m.seconds, set.images / std::max(m.seconds, 1e-9));
}

// The training set's options as train's build_loaders sets them (hyp.scratch-low's augmentation).
yolo::DatasetOptions train_options(int imgsz, int batch, int nc = kNc) {
  const yolo::Hyp hyp =
      yolo::load_hyp(yolo::resolve_config("hyp.scratch-low.yaml", yolo::ConfigKind::kHyp, "--hyp"));
  std::map<std::string, double> values;
  for (const auto& k : yolo::required_hyp_keys()) values[k] = hyp.at(k);
  yolo::DatasetOptions o;
  o.imgsz = imgsz;
  o.batch_size = batch;
  o.augment = true;
  o.hyp = yolo::AugmentHyp::from_map(values, "hyp.scratch-low.yaml");
  o.nc = nc;
  return o;
}

// One construction of the training dataset, as train pays it: file listing, the label cache's
// freshness hash, and either the full check (cache miss, cache written) or the cache read.
// With `steps`, parts[] then times the reload's steps again one by one (and the cache's size).
Measure construct_dataset(const ShapesSet& set, int batch, bool steps) {
  return in_child([&] {
    const yolo::DatasetOptions opt = train_options(640, batch);
    const std::vector<std::string> sources = {set.images_dir()};
    Measure m;
    std::unique_ptr<yolo::YoloDataset> ds;
    timed(m, [&] { ds = std::make_unique<yolo::YoloDataset>(sources, opt); });
    m.count = static_cast<long>(ds->size());
    if (!steps) return m;
    yolo::Stopwatch t;
    const auto files = yolo::list_image_files(sources);
    m.parts[0] = t.seconds();
    t.restart();
    const uint64_t hash = yolo::label_files_hash(files, kNc);
    m.parts[1] = t.seconds();
    t.restart();
    std::ifstream in(set.cache(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    yolo::LabelScan scan;
    if (!yolo::decode_label_cache(bytes, hash, scan)) {
      throw std::runtime_error(set.cache().string() + " did not decode as a fresh cache");
    }
    m.parts[2] = t.seconds();
    m.parts[3] = static_cast<double>(bytes.size());
    return m;
  });
}

struct SizeResult {
  int images = 0;
  Measure scan, reload;
};

double mtime_ns(const fs::path& p) {
  struct stat st {};
  if (stat(p.c_str(), &st) != 0) return -1;
  return st.st_mtim.tv_sec * 1e9 + st.st_mtim.tv_nsec;
}

double kib_growth(const Measure& m) { return static_cast<double>(m.peak_kib - m.rss_before_kib); }

SizeResult bench_size(const BenchArgs& a, int n) {
  const ShapesSet set = shapes_set(a, n, a.width);
  std::printf("\nN = %d images (%d px wide)\n", n, a.width);
  generate(set);
  fs::remove(set.cache());  // the first scan must be a cache miss
  SizeResult r;
  r.images = n;
  r.scan = construct_dataset(set, a.batch, false);
  if (!fs::exists(set.cache())) {
    throw std::runtime_error(set.cache().string() +
                             " was not written by the first scan; is its folder writable?");
  }
  const double written = mtime_ns(set.cache());
  r.reload = construct_dataset(set, a.batch, true);
  if (mtime_ns(set.cache()) != written) {
    throw std::runtime_error(set.cache().string() +
                             " was rewritten on the second construction: no cache hit");
  }
  if (r.scan.count != n) std::printf("  warning: %ld of %d images usable\n", r.scan.count, n);
  std::printf(
      "  scan (cache miss, cache written): %8.3f s  %7.1f us/image  peak RSS +%.1f MiB"
      "  %6.2f KiB/image\n",
      r.scan.seconds, 1e6 * r.scan.seconds / n, kib_growth(r.scan) / 1024, kib_growth(r.scan) / n);
  const double per10k = r.reload.seconds * 1e4 / n;
  std::printf(
      "  reload (cache hit):               %8.3f s  %7.1f us/image  peak RSS +%.1f MiB"
      "  %6.2f KiB/image\n",
      r.reload.seconds, 1e6 * r.reload.seconds / n, kib_growth(r.reload) / 1024,
      kib_growth(r.reload) / n);
  std::printf("  reload per 10k images: %.3f s (target < 1 s: %s)\n", per10k,
              per10k < 1.0 ? "met" : "NOT met");
  std::printf(
      "  reload steps: list files %.1f ms, stat + hash %.1f ms, read + decode %.1f ms "
      "(cache %.2f MiB)\n",
      1e3 * r.reload.parts[0], 1e3 * r.reload.parts[1], 1e3 * r.reload.parts[2],
      r.reload.parts[3] / (1024.0 * 1024.0));
  return r;
}

// The four figures whose growth with N is reported, as totals for one N.
struct Metric {
  const char* name;
  double (*total)(const SizeResult&);  // seconds or KiB
  double scale;                        // to us or KiB
  // Changes under this are not judged: timing noise, and the heap growing in steps of pages.
  double resolution;
  const char* resolution_text;
};
const Metric kMetrics[] = {
    {"scan time", [](const SizeResult& r) { return r.scan.seconds; }, 1e6, 0.1, "0.1 s"},
    {"scan memory", [](const SizeResult& r) { return kib_growth(r.scan); }, 1, 10240, "10 MiB"},
    {"reload time", [](const SizeResult& r) { return r.reload.seconds; }, 1e6, 0.1, "0.1 s"},
    {"reload memory", [](const SizeResult& r) { return kib_growth(r.reload); }, 1, 10240, "10 MiB"},
};

double per_image(const Metric& m, const SizeResult& r) { return m.total(r) / r.images; }
// Per image added since the previous size: leaves out the fixed start-up cost.
double marginal(const Metric& m, const SizeResult& prev, const SizeResult& r) {
  return (m.total(r) - m.total(prev)) / (r.images - prev.images);
}

// A linear cost a + b*N gives a per-image cost falling towards b and a constant marginal cost b.
// So with three sizes or more the last marginal cost is compared with the first; with two, the
// per-image costs (flat or falling: no faster than linear). 1.25x leaves room for timing noise.
void linearity_verdict(const std::vector<SizeResult>& rs, const Metric& m) {
  const size_t k = rs.size();
  const SizeResult &lo = rs.front(), &hi = rs.back();
  if (m.total(hi) - m.total(lo) < m.resolution) {
    std::printf("linearity: %s changes by under %s from N=%d to %d: too little to judge\n", m.name,
                m.resolution_text, lo.images, hi.images);
    return;
  }
  double ratio = per_image(m, hi) / std::max(per_image(m, lo), 1e-12);
  char basis[160];
  std::snprintf(basis, sizeof basis, "per image at N=%d is %.2fx that at N=%d", hi.images, ratio,
                lo.images);
  if (k >= 3 && marginal(m, rs[0], rs[1]) > 0) {
    ratio = marginal(m, rs[k - 2], hi) / marginal(m, rs[0], rs[1]);
    std::snprintf(basis, sizeof basis,
                  "added per image from N=%d to %d is %.2fx that from %d to %d", rs[k - 2].images,
                  hi.images, ratio, lo.images, rs[1].images);
  }
  std::printf("linearity: %s %s: %s\n", m.name, basis,
              ratio <= 1.25 ? "linear" : "grows faster than linear");
}

void report_growth(const std::vector<SizeResult>& rs) {
  std::printf("\ngrowth with N (marginal = change from the previous N / images added):\n");
  std::printf("%8s | %10s %10s %10s %10s | %10s %10s %10s %10s\n", "", "scan", "scan", "reload",
              "reload", "marg.scan", "marg.scan", "marg.rel.", "marg.rel.");
  std::printf("%8s | %10s %10s %10s %10s | %10s %10s %10s %10s\n", "N", "us/image", "KiB/image",
              "us/image", "KiB/image", "us/image", "KiB/image", "us/image", "KiB/image");
  for (size_t i = 0; i < rs.size(); ++i) {
    std::printf("%8d |", rs[i].images);
    for (const Metric& m : kMetrics) std::printf(" %10.2f", m.scale * per_image(m, rs[i]));
    std::printf(" |");
    for (const Metric& m : kMetrics) {
      if (i == 0) {
        std::printf(" %10s", "-");
      } else {
        std::printf(" %10.2f", m.scale * marginal(m, rs[i - 1], rs[i]));
      }
    }
    std::printf("\n");
  }
  if (rs.size() < 2) {
    std::printf("linearity: one size only; pass two or more to --sizes to compare\n");
    return;
  }
  for (const Metric& m : kMetrics) linearity_verdict(rs, m);
}

// Mosaic training batches from train's own loader, timed after one warm-up batch (thread start
// and the first images' decoding), over as many epochs as `batches` needs.
// The images in the started loader's next batch; at the end of `epoch` the next one starts, as
// in training.
long next_batch_images(yolo::DataLoader& loader, int64_t& epoch) {
  auto b = loader.next();
  if (!b) {
    loader.start_epoch(++epoch);
    b = loader.next();
  }
  return static_cast<long>(b->paths.size());  // `images` is undefined in recipe batches
}

Measure time_loader(const ShapesSet& set, const BenchArgs& a, int workers) {
  return in_child([&] {
    reset_peak_rss();
    auto ds = std::make_shared<yolo::YoloDataset>(std::vector<std::string>{set.images_dir()},
                                                  train_options(a.loader_imgsz, a.batch));
    yolo::LoaderOptions lo;
    lo.batch_size = a.batch;
    lo.workers = workers;
    yolo::DataLoader loader(ds, lo);
    int64_t epoch = 0;
    loader.start_epoch(epoch);
    auto next = [&] { return next_batch_images(loader, epoch); };
    next();
    Measure m;
    const yolo::Stopwatch t;
    for (int i = 0; i < a.loader_batches; ++i) m.count += next();
    m.seconds = t.seconds();
    m.peak_kib = status_kib("VmHWM");
    m.parts[0] = loader.workers();
    return m;
  });
}

void bench_loader(const BenchArgs& a) {
  const ShapesSet set = shapes_set(a, a.loader_images, a.loader_width);
  std::printf(
      "\nloader: %d px, mosaic (hyp.scratch-low), batch %d, %d timed batches after 1 "
      "warm-up, %d images %d px wide\n",
      a.loader_imgsz, a.batch, a.loader_batches, a.loader_images, a.loader_width);
  generate(set);
  for (int workers : a.loader_workers) {
    const Measure m = time_loader(set, a, workers);
    const int used = static_cast<int>(m.parts[0]);
    const double ips = m.count / std::max(m.seconds, 1e-9);
    std::printf(
        "  workers %d (used %d): %6ld images in %7.2f s  %7.1f images/s  %7.1f images/s "
        "per worker  peak RSS %ld MiB\n",
        workers, used, m.count, m.seconds, ips, ips / std::max(used, 1), m.peak_kib / 1024);
  }
}

// --images: the loader on JPEGs.

// A folder the loader reads: root/images/<split> and root/labels/<split>.
struct JpegSet {
  fs::path root;
  std::string split;  // "" when the images lie in images/ itself
  std::string images_dir() const { return (root / "images" / split).string(); }
};

size_t count_files(const fs::path& dir) {
  size_t n = 0;
  if (!fs::is_directory(dir)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

// The split of a dataset folder: images/<split> when images/ holds folders (train2017 or train when
// it holds several), else "" (images/ itself).
std::string find_split(const fs::path& src) {
  const fs::path images = src / "images";
  if (!fs::is_directory(images)) {
    throw yolo::UsageError("--images: " + src.string() + " has no images/ folder");
  }
  std::vector<std::string> subs;
  for (const auto& e : fs::directory_iterator(images)) {
    if (e.is_directory()) subs.push_back(e.path().filename().string());
  }
  if (subs.empty()) return "";
  if (subs.size() == 1) return subs[0];
  for (const char* name : {"train2017", "train"}) {
    if (std::find(subs.begin(), subs.end(), name) != subs.end()) return name;
  }
  throw yolo::UsageError("--images: " + images.string() +
                         " holds several splits and none is train2017 or train");
}

// Copies the files under `from` into `to`, writable: a read-only source's modes would make the
// copy impossible to replace or delete later.
void copy_tree(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const fs::path dest = to / fs::relative(e.path(), from);
    if (e.is_directory()) {
      fs::create_directories(dest);
    } else if (e.is_regular_file()) {
      fs::copy_file(e.path(), dest, fs::copy_options::overwrite_existing);
      fs::permissions(dest, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    }
  }
}

// SRC's split copied to root/jpeg_<name>, since both our loader and YOLOv5's write a label cache
// beside the labels; a copy with as many files is reused.
JpegSet copied_set(const BenchArgs& a) {
  const fs::path src = fs::weakly_canonical(a.images);
  const std::string split = find_split(src);
  const fs::path src_images = src / "images" / split, src_labels = src / "labels" / split;
  if (!fs::is_directory(src_labels)) {
    throw yolo::UsageError("--images: " + src.string() + " has no labels/" + split + " folder");
  }
  JpegSet set{fs::weakly_canonical(fs::path(a.root) / ("jpeg_" + src.filename().string())), split};
  if (set.root == src) {
    std::printf("images: %s (in place)\n", set.root.string().c_str());
    return set;
  }
  const fs::path images = set.root / "images" / split, labels = set.root / "labels" / split;
  const size_t n = count_files(src_images);
  if (n > 0 && count_files(images) == n && count_files(labels) == count_files(src_labels)) {
    std::printf("images: %s (copy of %s, reused)\n", set.root.string().c_str(), src.c_str());
    return set;
  }
  fs::remove_all(set.root);
  copy_tree(src_images, images);
  copy_tree(src_labels, labels);
  std::printf("images: %s (copied from %s)\n", set.root.string().c_str(), src.c_str());
  return set;
}

// Shapes images (160-256 px high) stretched to 4:3 and given sensor-like noise, so that decoding
// them costs about what a photo of that size does. Their boxes are normalised, so the labels
// carry over unchanged.
void generate_jpegs(const fs::path& root, int count, int width) {
  const fs::path tmp = root.string() + ".tmp" + std::to_string(getpid());
  fs::remove_all(tmp);
  yolo::ShapesSpec spec;
  spec.train = count;
  spec.val = 1;
  spec.width = width;
  yolo::ensure_shapes_dataset((tmp / "png").string(), spec);
  const fs::path png_images = tmp / "png" / "images" / "train";
  const fs::path images = tmp / "images" / "train", labels = tmp / "labels" / "train";
  fs::create_directories(images);
  fs::create_directories(labels);
  std::vector<fs::path> pngs;
  for (const auto& e : fs::directory_iterator(png_images)) pngs.push_back(e.path());
  std::sort(pngs.begin(), pngs.end());
  for (size_t i = 0; i < pngs.size(); ++i) {
    cv::Mat img = cv::imread(pngs[i].string(), cv::IMREAD_COLOR);
    if (img.empty()) throw std::runtime_error("cannot read " + pngs[i].string());
    cv::resize(img, img, cv::Size(width, width * 3 / 4), 0, 0, cv::INTER_LINEAR);
    cv::Mat wide, noise(img.size(), CV_16SC3);
    img.convertTo(wide, CV_16SC3);
    cv::RNG rng(0x5eed + i);
    rng.fill(noise, cv::RNG::NORMAL, 0, 6);
    cv::Mat(wide + noise).convertTo(img, CV_8UC3);  // saturates at 0 and 255
    const std::string stem = pngs[i].stem().string();
    const fs::path jpg = images / (stem + ".jpg");
    if (!cv::imwrite(jpg.string(), img, {cv::IMWRITE_JPEG_QUALITY, 90})) {
      throw std::runtime_error("cannot write " + jpg.string());
    }
    fs::copy_file(tmp / "png" / "labels" / "train" / (stem + ".txt"), labels / (stem + ".txt"));
  }
  fs::remove_all(tmp / "png");
  std::error_code ec;
  fs::rename(tmp, root, ec);
  if (ec) {
    fs::remove_all(tmp);
    if (!fs::exists(root)) throw std::runtime_error("cannot create " + root.string());
  }
}

JpegSet generated_set(const BenchArgs& a) {
  JpegSet set{
      fs::weakly_canonical(fs::path(a.root) / ("jpeg_generated_" + std::to_string(a.images_count) +
                                               "_w" + std::to_string(a.images_width))),
      "train"};
  if (fs::exists(set.root)) {
    std::printf("images: %s (generated, reused)\n", set.root.string().c_str());
    return set;
  }
  fs::create_directories(a.root);
  const Measure m = in_child([&] {  // OpenCV may start threads: never in the parent
    Measure r;
    timed(r, [&] { generate_jpegs(set.root, a.images_count, a.images_width); });
    return r;
  });
  std::printf("images: %s (generated in %.1f s)\n", set.root.string().c_str(), m.seconds);
  return set;
}

// The one place each mode is spelled in the dataset's options.
void set_cache_mode(yolo::DatasetOptions& o, CacheMode mode) {
  o.cache = mode == CacheMode::kRam ? "ram" : mode == CacheMode::kDisk ? "disk" : "";
  o.image_cache_bytes = mode == CacheMode::kNone || mode == CacheMode::kDisk ? 0 : -1;
}

// The first construction checks the labels and writes their cache; the timed ones read it.
void check_labels(const JpegSet& set, const BenchArgs& a) {
  const Measure m = in_child([&] {
    Measure r;
    timed(r, [&] {
      yolo::DatasetOptions o = train_options(a.loader_imgsz, a.images_batch, kCocoNc);
      set_cache_mode(o, CacheMode::kNone);
      const yolo::YoloDataset ds({set.images_dir()}, o);
      r.count = static_cast<long>(ds.size());
      for (const cv::Size& s : ds.image_sizes()) {
        r.parts[0] += s.width;
        r.parts[1] += s.height;
      }
    });
    return r;
  });
  const double n = std::max(m.count, 1L);
  std::printf(
      "  %ld images, %.0fx%.0f px on average; labels checked in %.2f s (label cache; not "
      "part of the figures)\n",
      m.count, m.parts[0] / n, m.parts[1] / n, m.seconds);
  if (m.count < a.images_batch) {
    throw std::runtime_error(set.images_dir() + " has " + std::to_string(m.count) +
                             " usable images, fewer than --images-batch (" +
                             std::to_string(a.images_batch) + ")");
  }
}

enum JpegPart { kUsed, kConstruct, kConstructKib, kFirst, kCacheBytes, kCachedImages, kHits };

// One cache mode and worker count: the dataset's construction (with ram: every image decoded and
// kept), the first batch (loader start, workers' first images), then the steady batches.
Measure time_jpeg_loader(const JpegSet& set, const BenchArgs& a, CacheMode mode, int workers) {
  return in_child([&] {
    // One intra-op thread: the worker that finishes a batch collates it, so the process uses no
    // more cores than it has workers.
    at::set_num_threads(1);
    // As train: freed images and canvases are reused, not unmapped and faulted in again (a
    // third of a mosaic's time without it).
    yolo::reuse_freed_memory();
    yolo::DatasetOptions o = train_options(a.loader_imgsz, a.images_batch, kCocoNc);
    set_cache_mode(o, mode);
    o.threads = workers;  // --cache ram fills on as many threads as are measured
    Measure m;
    reset_peak_rss();
    m.rss_before_kib = status_kib("VmRSS");
    yolo::Stopwatch t;
    auto ds = std::make_shared<yolo::YoloDataset>(std::vector<std::string>{set.images_dir()}, o);
    m.parts[kConstruct] = t.seconds();
    m.parts[kConstructKib] = static_cast<double>(status_kib("VmRSS") - m.rss_before_kib);
    yolo::LoaderOptions lo;
    lo.batch_size = a.images_batch;
    lo.workers = workers;
    lo.float_images = false;  // bytes, as train takes them to the device
    lo.pin_memory = false;
    lo.recipes = a.images_recipes == 1;
    t.restart();
    yolo::DataLoader loader(ds, lo);
    int64_t epoch = 0;
    loader.start_epoch(epoch);
    auto next = [&] { return next_batch_images(loader, epoch); };
    next();
    m.parts[kFirst] = t.seconds();
    t.restart();
    for (int i = 0; i < a.images_batches; ++i) m.count += next();
    m.seconds = t.seconds();
    m.peak_kib = status_kib("VmHWM");
    m.parts[kUsed] = loader.workers();
    const yolo::ImageCache::Stats stats = ds->image_cache_stats();
    const bool ram = mode == CacheMode::kRam;
    m.parts[kCacheBytes] = static_cast<double>(ram ? ds->ram_cache_bytes() : stats.bytes);
    m.parts[kCachedImages] = static_cast<double>(ram ? ds->size() : stats.images);
    if (mode == CacheMode::kDisk) {  // the files' bytes
      m.parts[kCacheBytes] = static_cast<double>(ds->disk_cache_stats().bytes);
      m.parts[kCachedImages] = static_cast<double>(ds->disk_cache_stats().stored);
    }
    const double lookups = static_cast<double>(stats.hits + stats.misses);
    m.parts[kHits] = lookups > 0 ? 100.0 * static_cast<double>(stats.hits) / lookups : 0;
    return m;
  });
}

void report_jpeg(const Measure& m, CacheMode mode, int workers) {
  const int used = static_cast<int>(m.parts[kUsed]);
  const double ips = m.count / std::max(m.seconds, 1e-9);
  const double cached = m.parts[kCachedImages];
  std::printf(
      "  cache %-7s workers %d (used %d): dataset %.3f s, RSS %+.1f MiB | first batch %.3f s | "
      "%ld images in %.2f s: %.1f images/s, %.1f per worker | peak RSS %+.1f MiB | cache %.1f "
      "MiB, %.0f B/image (%.0f images",
      kCacheNames[static_cast<int>(mode)], workers, used, m.parts[kConstruct],
      m.parts[kConstructKib] / 1024, m.parts[kFirst], m.count, m.seconds, ips,
      ips / std::max(used, 1), kib_growth(m) / 1024, m.parts[kCacheBytes] / (1024.0 * 1024.0),
      cached > 0 ? m.parts[kCacheBytes] / cached : 0.0, cached);
  if (mode == CacheMode::kBounded) std::printf(", %.0f%% hits", m.parts[kHits]);
  std::printf(")\n");
}

void bench_images(const BenchArgs& a) {
  const JpegSet set = a.images == "generate" ? generated_set(a) : copied_set(a);
  check_labels(set, a);
  if (a.images_batches == 0) return;
  std::printf(
      "mosaic loader (hyp.scratch-low), %d px, batch %d, uint8: first batch, then %d timed "
      "batches; 1 intra-op thread, OpenCV single-threaded%s\n",
      a.loader_imgsz, a.images_batch, a.images_batches,
      a.images_recipes ? "; RECIPES: the workers decode and draw, the pixels are left to the "
                         "device (--augment-device cuda)"
                       : "");
  for (CacheMode mode : a.caches) {
    for (int workers : a.loader_workers) {
      report_jpeg(time_jpeg_loader(set, a, mode, workers), mode, workers);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return yolo::run_app("bench_data", [&] {
    const BenchArgs a = parse_args(argc, argv);
    if (!a.images.empty()) {
      std::printf("bench_data --images: %u hardware threads\n",
                  std::thread::hardware_concurrency());
      bench_images(a);
      std::fflush(stdout);
      return 0;
    }
    std::printf("bench_data: data under %s, %u hardware threads (the scan uses all of them)\n",
                a.root.c_str(), std::thread::hardware_concurrency());
    std::vector<SizeResult> results;
    for (int n : a.sizes) results.push_back(bench_size(a, n));
    report_growth(results);
    if (a.loader_batches > 0) bench_loader(a);
    std::fflush(stdout);
    return 0;
  });
}

// Reading COCO JSON at COCO's size: writes an annotations file shaped like instances_train2017.json
// (images, polygon and RLE segmentations, boxes, categories) and a results file like val.py's
// --save-json output, then times load_coco_ground_truth and load_coco_results, each in a fresh
// process so that its peak RSS is its own.
//
//   build/bin/bench_coco_json [--images 118287] [--annotations 860001] [--detections 500000]
//                             [--dir DIR] [--seed 0]
//
// Files are kept in DIR (default: a temporary folder, removed at the end) and reused when their
// sizes match a previous run with the same arguments.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>

#include "utils/eval/coco_eval.h"

namespace fs = std::filesystem;

namespace {

struct Args {
  long images = 118287, annotations = 860001, detections = 500000;
  uint64_t seed = 0;
  std::string dir;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--images") {
      a.images = std::stol(v);
    } else if (k == "--annotations") {
      a.annotations = std::stol(v);
    } else if (k == "--detections") {
      a.detections = std::stol(v);
    } else if (k == "--seed") {
      a.seed = std::stoull(v);
    } else if (k == "--dir") {
      a.dir = v;
    } else {
      throw std::invalid_argument("unknown flag " + k);
    }
  }
  if (a.images < 1 || a.annotations < 0 || a.detections < 0)
    throw std::invalid_argument("--images must be >= 1, the counts >= 0");
  return a;
}

// A file written through a buffer, closed (and checked) at the end.
class Out {
 public:
  explicit Out(const fs::path& p) : f_(std::fopen(p.c_str(), "w")), path_(p) {
    if (!f_) throw std::runtime_error("cannot write " + p.string());
  }
  ~Out() {
    if (f_) std::fclose(f_);
  }
  template <typename... T>
  void put(const char* fmt, T... v) {
    std::fprintf(f_, fmt, v...);
  }
  void close() {
    const bool bad = std::ferror(f_) != 0;
    if (std::fclose(f_) != 0 || bad) throw std::runtime_error("write error on " + path_.string());
    f_ = nullptr;
  }

 private:
  std::FILE* f_;
  fs::path path_;
};

// COCO's layout: image ids spread over 1..581929, 80 categories with ids up to 90, about 1 %
// crowd annotations with RLE counts, the others one polygon of 4..44 points.
void write_annotations(const fs::path& path, const Args& a) {
  std::mt19937_64 rng(a.seed);
  std::uniform_real_distribution<double> u(0, 1);
  Out out(path);
  out.put("{\"info\": {\"description\": \"COCO-size benchmark\", \"version\": \"1.0\"}, ");
  out.put("\"licenses\": [{\"url\": \"http://creativecommons.org/licenses/by/2.0/\", \"id\": 4, ");
  out.put("\"name\": \"Attribution License\"}], \"images\": [");
  const long stride = std::max(1L, 581929 / a.images);
  for (long i = 0; i < a.images; ++i) {
    const long id = 1 + i * stride;
    out.put("%s{\"license\": %d, \"file_name\": \"%012ld.jpg\", ", i ? ", " : "",
            1 + static_cast<int>(i % 8), id);
    out.put("\"coco_url\": \"http://images.cocodataset.org/train2017/%012ld.jpg\", ", id);
    out.put("\"height\": %d, \"width\": 640, \"date_captured\": \"2013-11-14 11:18:45\", ",
            360 + static_cast<int>(i % 120));
    out.put("\"flickr_url\": \"http://farm9.staticflickr.com/8186/8119368305_4e622c8349_z.jpg\", ");
    out.put("\"id\": %ld}", id);
  }
  out.put("], \"annotations\": [");
  for (long k = 0; k < a.annotations; ++k) {
    const double x = u(rng) * 500, y = u(rng) * 300, w = 1 + u(rng) * 139, h = 1 + u(rng) * 59;
    const bool crowd = u(rng) < 0.01;
    out.put("%s{\"segmentation\": ", k ? ", " : "");
    if (crowd) {
      out.put("{\"counts\": [");
      for (int c = 0; c < 100; ++c) out.put("%s%d", c ? "," : "", static_cast<int>(u(rng) * 900));
      out.put("], \"size\": [480, 640]}");
    } else {
      const int points = 4 + static_cast<int>(u(rng) * 41);
      out.put("[[");
      for (int p = 0; p < points; ++p)
        out.put("%s%.2f,%.2f", p ? "," : "", x + u(rng) * w, y + u(rng) * h);
      out.put("]]");
    }
    out.put(", \"area\": %.5f, \"iscrowd\": %d, \"image_id\": %ld, ", w * h * 0.6, crowd ? 1 : 0,
            1 + (static_cast<long>(u(rng) * a.images)) * stride);
    out.put("\"bbox\": [%.2f,%.2f,%.2f,%.2f], \"category_id\": %d, \"id\": %ld}", x, y, w, h,
            1 + static_cast<int>(u(rng) * 90), 1 + k);
  }
  out.put("], \"categories\": [");
  for (int c = 1; c <= 90; ++c)
    out.put("%s{\"supercategory\": \"thing\", \"id\": %d, \"name\": \"class%d\"}",
            c > 1 ? ", " : "", c, c);
  out.put("]}\n");
  out.close();
}

// val.py's --save-json lines: {"image_id": N, "category_id": C, "bbox": [...], "score": S}.
void write_results(const fs::path& path, const Args& a) {
  std::mt19937_64 rng(a.seed + 1);
  std::uniform_real_distribution<double> u(0, 1);
  const long stride = std::max(1L, 581929 / a.images);
  Out out(path);
  out.put("[");
  for (long k = 0; k < a.detections; ++k) {
    out.put("%s{\"image_id\": %ld, \"category_id\": %d, ", k ? ", " : "",
            1 + (static_cast<long>(u(rng) * a.images)) * stride, 1 + static_cast<int>(u(rng) * 90));
    out.put("\"bbox\": [%.3f, %.3f, %.3f, %.3f], \"score\": %.5f}", u(rng) * 500, u(rng) * 300,
            1 + u(rng) * 139, 1 + u(rng) * 59, u(rng));
  }
  out.put("]\n");
  out.close();
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024;  // KiB on Linux
}

// Runs `fn` in a fresh child process, so that the peak RSS it sees is its own; true if it
// returned (an exception is printed under `name`).
template <typename Fn>
bool in_child(const char* name, Fn fn) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int code = 0;
    try {
      fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", name, e.what());
      code = 1;
    }
    std::fflush(stdout);
    std::_Exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Times `read` (which says what it read) in a child; prints one table row.
template <typename Fn>
bool measure(const char* name, const fs::path& file, Fn read) {
  return in_child(name, [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string what = read();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double mb = static_cast<double>(fs::file_size(file)) / 1e6;
    std::printf("| %-22s | %8.0f | %6.2f | %8.0f | %8.0f | %s |\n", name, mb, s, mb / s,
                peak_rss_mib(), what.c_str());
  });
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_coco_json: %s\n", e.what());
    return 2;
  }
  const bool temp = a.dir.empty();
  const fs::path dir =
      temp ? fs::temp_directory_path() / ("bench_coco_json." + std::to_string(getpid()))
           : fs::path(a.dir);
  fs::create_directories(dir);
  const std::string tag =
      std::to_string(a.images) + "_" + std::to_string(a.annotations) + "_" + std::to_string(a.seed);
  const fs::path gt = dir / ("instances_" + tag + ".json");
  const fs::path res = dir / ("results_" + std::to_string(a.detections) + "_" + tag + ".json");
  const auto t0 = std::chrono::steady_clock::now();
  if (!fs::exists(gt)) write_annotations(gt, a);
  if (!fs::exists(res)) write_results(res, a);
  std::printf("files ready in %.1f s: %s, %s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              gt.c_str(), res.c_str());
  // The process's own peak before it reads anything (LibTorch's libraries are mapped), to subtract.
  in_child("baseline", [] {
    std::printf("peak RSS of the process before reading: %.0f MiB\n", peak_rss_mib());
  });
  std::printf("| %-22s | %8s | %6s | %8s | %8s | %s |\n", "read", "MB", "s", "MB/s", "peak MiB",
              "content");
  std::printf("|---|---|---|---|---|---|\n");
  const bool gt_ok = measure("load_coco_ground_truth", gt, [&] {
    const yolo::CocoGroundTruth g = yolo::load_coco_ground_truth(gt.string());
    return std::to_string(g.image_ids.size()) + " images, " + std::to_string(g.annotations.size()) +
           " annotations, " + std::to_string(g.category_ids.size()) + " categories";
  });
  const bool res_ok = measure("load_coco_results", res, [&] {
    return std::to_string(yolo::load_coco_results(res.string()).size()) + " detections";
  });
  if (temp) fs::remove_all(dir);
  return gt_ok && res_ok ? 0 : 1;
}

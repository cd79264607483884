// Inference speed of the three weight formats val and detect run (.pt, .torchscript, .onnx),
// beside YOLOv5 7.0's own PyTorch model and detect.py on the same weights, sizes, threads, device
// and images (scripts/bench_infer_yolov5.py, run by the test Python where YOLOv5 is installed).
// Prints figures only; nothing is asserted. ONNX files run on the CPU (OpenCV's dnn) whatever
// --device is; on CUDA the times are taken after the device has finished.
// Usage: bench_infer [--cfg yolov5s.yaml | --weights PATH.pt] [--imgsz 640] [--batches 1,8]
//                    [--iters 10] [--images 16] [--threads N] [--device cpu|0] [--out DIR]
//                    [--python PATH]
//   model throughput: random (B, 3, imgsz, imgsz) input, 2 warm-up predicts, the median of
//                     --iters timed ones, per format and batch size.
//   detect:           the detect loop (read, letterbox, model, NMS; nothing saved) over --images
//                     generated JPEGs, wall time / images, after a 2-image warm-up run.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <string>
#include <vector>

#include "models/weights.h"
#include "models/yolo.h"
#include "utils/core/app_main.h"
#include "utils/core/cli.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/device.h"
#include "utils/core/stopwatch.h"
#include "utils/eval/inference_model.h"
#include "utils/eval/predictor.h"
#include "utils/export/export_main.h"
#include "utils/export/onnx_export.h"

#ifndef YOLO_DEFAULT_PYTHON
#define YOLO_DEFAULT_PYTHON "python3"
#endif

namespace fs = std::filesystem;

namespace {

struct BenchArgs {
  std::string cfg = "yolov5s.yaml", weights, out, python, device = "cpu";
  int imgsz = 640, iters = 10, images = 16, threads = 0;
  std::vector<int> batches = {1, 8};
};

const std::vector<yolo::cli::Flag<BenchArgs>>& flags() {
  using A = BenchArgs;
  using yolo::cli::at_least;
  using yolo::cli::Bind;
  static const std::vector<yolo::cli::Flag<A>> table = {
      Bind("cfg", &A::cfg, "model YAML of the random-initialised model timed without --weights"),
      Bind("weights", &A::weights, "weights to time: ours or YOLOv5's .pt (default: random --cfg)")
          .metavar("PATH")
          .no_default(),
      Bind("imgsz", &A::imgsz, "square input size").check(at_least(32, "must be >= 32")),
      Bind("batches", &A::batches, "batch sizes of the model throughput table (comma list)")
          .check([](const std::vector<int>& v) {
            if (v.empty()) return std::string("give at least one batch size");
            for (int b : v) {
              if (b < 1) return "batch sizes must be >= 1, got " + std::to_string(b);
            }
            return std::string();
          }),
      Bind("iters", &A::iters, "timed iterations per batch size, after 2 warm-up")
          .check(at_least(1, "must be >= 1")),
      Bind("images", &A::images, "generated images for the detect comparison")
          .check(at_least(1, "must be >= 1")),
      Bind("device", &A::device, "where .pt and .torchscript run: cpu or a CUDA index"),
      Bind("threads", &A::threads, "intra-op threads (default: LibTorch's)")
          .check(at_least(0, "must be >= 0"))
          .no_default(),
      Bind("out", &A::out, "work folder, kept (default: a temp folder removed at the end)")
          .metavar("DIR")
          .no_default(),
      Bind("python", &A::python,
           "Python with YOLOv5 7.0 (default: .cache/test-venv/bin/python when present, else the "
           "build's Python)")
          .metavar("PATH")
          .no_default(),
  };
  return table;
}

// The work folder; a temp one is removed when the benchmark ends, however it ends.
class WorkDir {
 public:
  explicit WorkDir(const std::string& out)
      : path_(out.empty()
                  ? fs::temp_directory_path() / ("yolo_bench_infer_" + std::to_string(::getpid()))
                  : fs::path(out)),
        temp_(out.empty()) {
    fs::create_directories(path_);
    path_ = fs::absolute(path_);
  }
  ~WorkDir() {
    std::error_code ec;
    if (temp_) fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool temp_;
};

std::string machine_line(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  int cores = 0;
  while (std::getline(in, line)) {
    if (line.rfind("processor", 0) == 0) ++cores;
    const size_t colon = line.find(':');
    if (line.rfind("model name", 0) == 0 && colon != std::string::npos) {
      model = line.substr(colon + 2);
    }
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M", std::localtime(&now));
  // Other processes' load skews every figure on a small machine: shown so a reader can tell.
  std::string load;
  std::ifstream("/proc/loadavg") >> load;
  return "bench_infer: " + model + ", " + std::to_string(cores) + " cores; LibTorch " +
         TORCH_VERSION + "; " + std::to_string(threads) + " threads; " + date +
         (load.empty() ? "" : "; load average " + load);
}

// The weights every format is made from, and the model YAML to read them with ("" when the file
// says: a YOLOv5 checkpoint, or ours whose run names its YAML).
struct Prepared {
  fs::path pt;
  std::string cfg;
};

Prepared prepare_weights(const BenchArgs& a, bool cfg_given, const fs::path& dir) {
  Prepared p;
  if (a.weights.empty()) {
    p.cfg = yolo::resolve_config(a.cfg, yolo::ConfigKind::kModel, "--cfg");
    torch::manual_seed(0);
    yolo::DetectionModel model = yolo::build_model(p.cfg, 80);
    p.pt = dir / (fs::path(p.cfg).stem().string() + ".pt");
    yolo::write_state_dict(yolo::state_dict(*model), p.pt.string());
    return p;
  }
  if (!fs::is_regular_file(a.weights)) throw yolo::UsageError("--weights: no file " + a.weights);
  p.pt = dir / fs::path(a.weights).filename();
  fs::copy_file(a.weights, p.pt, fs::copy_options::overwrite_existing);
  if (cfg_given) {
    p.cfg = yolo::resolve_config(a.cfg, yolo::ConfigKind::kModel, "--cfg");
  } else if (!yolo::is_yolov5_checkpoint(p.pt.string())) {
    p.cfg = yolo::model_cfg_for_weights(yolo::read_weights_file(a.weights), a.weights);
  }
  return p;
}

bool onnx_enabled() { return yolo::onnx_export_available() && yolo::onnx_runtime_available(); }

fs::path batch_dir(const fs::path& work, int b) { return work / ("b" + std::to_string(b)); }

fs::path with_suffix(const fs::path& dir, const Prepared& p, const char* suffix) {
  return dir / (p.pt.stem().string() + suffix);
}

std::string first_line(const std::string& s) {
  const size_t start = s.find_first_not_of("\n ");
  if (start == std::string::npos) return s;
  return s.substr(start, s.find('\n', start) - start);
}

// A format that fails to load or run fails its own rows, which say why; the others still run,
// and the exit status counts the failures.
struct Failures {
  int count = 0;
  void row(int width, const std::string& name, const std::string& cells, const std::exception& e) {
    ++count;
    std::printf("%s%-*s %s%sfailed: %s\n", width ? "  " : "", width, name.c_str(), cells.c_str(),
                cells.empty() ? "" : " ", first_line(e.what()).c_str());
    std::fflush(stdout);
  }
};

// One folder per batch size (batch 1 always: detect runs one image at a time), each with a copy of
// the .pt and its ONNX file fixed to that batch; batch 1's also holds the .torchscript.
void export_all(const BenchArgs& a, const Prepared& p, const fs::path& work, Failures& fail) {
  std::set<int> batches(a.batches.begin(), a.batches.end());
  batches.insert(1);
  for (int b : batches) {
    const fs::path dir = batch_dir(work, b);
    fs::create_directories(dir);
    const fs::path pt = dir / p.pt.filename();
    fs::copy_file(p.pt, pt, fs::copy_options::overwrite_existing);
    yolo::ExportArgs e;
    e.weights = pt.string();
    e.cfg = p.cfg;
    e.imgsz = {a.imgsz, a.imgsz};
    e.batch_size = b;
    e.device = "cpu";
    e.include.clear();
    if (b == 1) e.include.push_back("torchscript");
    if (onnx_enabled()) e.include.push_back("onnx");
    if (e.include.empty()) continue;
    std::string what;
    for (const std::string& f : e.include) what += (what.empty() ? "." : " + .") + f;
    what = "export " + p.pt.filename().string() + " -> " + what + " (batch " + std::to_string(b) +
           ", " + std::to_string(a.imgsz) + " px):";
    try {
      const yolo::Stopwatch t;
      yolo::run_export(e);
      std::printf("%s %.2f s%s\n", what.c_str(), t.seconds(),
                  b == 1 ? " (target for yolov5s: < 5 s on a 2-core CPU)" : "");
    } catch (const std::exception& ex) {
      fail.row(0, what, "", ex);
    }
  }
  if (!onnx_enabled()) {
    std::printf("ONNX: skipped (this build %s)\n", yolo::onnx_export_available()
                                                       ? "cannot run ONNX files: no OpenCV dnn"
                                                       : "has no ONNX exporter");
  }
  std::fflush(stdout);
}

// The median milliseconds of one predict of a (b, 3, imgsz, imgsz) batch.
double median_ms(yolo::InferenceModel& model, int b, int imgsz, int iters,
                 const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({b, 3, imgsz, imgsz}).to(device);
  for (int i = 0; i < 2; ++i) model.predict(x);
  yolo::cuda_synchronize(device);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const yolo::Stopwatch t;
    model.predict(x);
    yolo::cuda_synchronize(device);
    ms.push_back(t.milliseconds());
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

void throughput_row(const std::string& name, int b, double ms_per_batch) {
  std::printf("  %-24s %6d %10.1f %10.2f %10.2f\n", name.c_str(), b, 1000.0 * b / ms_per_batch,
              ms_per_batch / b, ms_per_batch);
  std::fflush(stdout);
}

void our_throughput(const BenchArgs& a, const Prepared& p, const fs::path& work, Failures& fail) {
  const torch::Device device = yolo::select_device(a.device).device;
  std::printf(
      "\nmodel throughput (%s, random %dx%d input, float32, median of %d iterations after 2 "
      "warm-up):\n  %-24s %6s %10s %10s %10s\n",
      a.device == "cpu" ? "CPU" : ("CUDA " + a.device + "; ONNX on the CPU").c_str(), a.imgsz,
      a.imgsz, a.iters, "format", "batch", "images/s", "ms/image", "ms/batch");
  struct Format {
    const char* suffix;
    bool per_batch;  // a file per batch size (ONNX is fixed to its export's batch)
  };
  std::vector<Format> formats = {{".pt", false}, {".torchscript", false}};
  if (onnx_enabled()) formats.push_back({".onnx", true});
  for (const Format& f : formats) {
    const std::string name = std::string("ours (") + f.suffix + ")";
    yolo::InferenceOptions o;
    if (std::string(f.suffix) == ".pt") o.cfg = p.cfg;
    const bool on_cpu = std::string(f.suffix) == ".onnx";
    o.device = on_cpu ? torch::Device(torch::kCPU) : device;
    std::unique_ptr<yolo::InferenceModel> model;
    for (int b : a.batches) {
      try {
        if (!model || f.per_batch) {
          model.reset();
          const fs::path file = with_suffix(batch_dir(work, f.per_batch ? b : 1), p, f.suffix);
          model = std::make_unique<yolo::InferenceModel>(file.string(), o);
        }
        throughput_row(name, b, median_ms(*model, b, a.imgsz, a.iters, o.device));
      } catch (const std::exception& e) {
        char cells[16];
        std::snprintf(cells, sizeof(cells), "%6d", b);
        fail.row(24, name, cells, e);
      }
    }
  }
  if (!onnx_enabled()) std::printf("  %-24s skipped (no ONNX in this build)\n", "ours (.onnx)");
}

// Deterministic COCO-sized photos stand-ins: a noisy gradient with filled shapes, as JPEG.
void write_images(const fs::path& dir, const fs::path& warmup_dir, int n) {
  fs::create_directories(dir);
  fs::create_directories(warmup_dir);
  cv::RNG rng(0);
  for (int i = 0; i < n; ++i) {
    cv::Mat im(810, 1080, CV_8UC3);
    for (int y = 0; y < im.rows; ++y) {
      im.row(y).setTo(cv::Scalar(60 + y * 120 / im.rows, 90, 160 - y * 100 / im.rows));
    }
    cv::Mat noise(im.size(), CV_8UC3);
    rng.fill(noise, cv::RNG::UNIFORM, 0, 40);
    im += noise;
    for (int k = 0; k < 24; ++k) {
      const cv::Scalar color(rng.uniform(0, 256), rng.uniform(0, 256), rng.uniform(0, 256));
      const cv::Point c(rng.uniform(40, im.cols - 40), rng.uniform(40, im.rows - 40));
      const int r = rng.uniform(15, 160);
      if (k % 3 == 0) {
        cv::circle(im, c, r, color, cv::FILLED, cv::LINE_AA);
      } else if (k % 3 == 1) {
        cv::rectangle(im, c - cv::Point(r, r / 2), c + cv::Point(r, r / 2), color, cv::FILLED);
      } else {
        cv::ellipse(im, c, cv::Size(r, r / 3), rng.uniform(0, 180), 0, 360, color, cv::FILLED,
                    cv::LINE_AA);
      }
    }
    char name[32];
    std::snprintf(name, sizeof(name), "img_%03d.jpg", i);
    if (!cv::imwrite((dir / name).string(), im)) {
      throw std::runtime_error((dir / name).string() + ": cannot write the image");
    }
    if (i < 2) fs::copy_file(dir / name, warmup_dir / name, fs::copy_options::overwrite_existing);
  }
}

// Wall milliseconds per image of the detect loop over `images`, after a warm-up run.
double detect_ms(const BenchArgs& a, const std::string& weights, const std::string& cfg,
                 const fs::path& work) {
  yolo::DetectConfig c;
  c.weights = weights;
  c.cfg = cfg;
  c.device = weights.size() > 5 && weights.substr(weights.size() - 5) == ".onnx" ? "cpu" : a.device;
  c.imgsz = {a.imgsz};
  c.conf_thres = 0.25;
  c.iou_thres = 0.45;
  c.nosave = true;
  c.project = (work / "detect_runs").string();
  c.exist_ok = true;
  c.source = (work / "warmup").string();
  c.name = "warmup";
  yolo::run_detect(c);
  c.source = (work / "images").string();
  c.name = "timed";
  const yolo::Stopwatch t;
  yolo::run_detect(c);
  return t.milliseconds() / a.images;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string python_of(const BenchArgs& a) {
  if (!a.python.empty()) return a.python;
  const std::string venv = yolo::project_root() + "/.cache/test-venv/bin/python";
  return ::access(venv.c_str(), X_OK) == 0 ? venv : YOLO_DEFAULT_PYTHON;
}

struct Yolov5Result {
  std::vector<std::pair<int, double>> model_ms;  // batch, ms per batch
  double detect_ms = -1;
  std::string skip;  // why nothing was timed
};

std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

Yolov5Result run_yolov5(const BenchArgs& a, const Prepared& p, int threads, const fs::path& work) {
  std::string batches;
  for (int b : a.batches) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  const fs::path log = work / "yolov5.log";
  const std::string python = python_of(a);
  const std::string cmd =
      quoted(python) + " " + quoted(yolo::project_root() + "/scripts/bench_infer_yolov5.py") +
      " --weights " + quoted((batch_dir(work, 1) / p.pt.filename()).string()) + " --cfg " +
      quoted(p.cfg) + " --work " + quoted((work / "yolov5").string()) + " --imgsz " +
      std::to_string(a.imgsz) + " --batches " + batches + " --iters " + std::to_string(a.iters) +
      " --threads " + std::to_string(threads) + " --device " + quoted(a.device) + " --source " +
      quoted((work / "images").string()) + " --warmup-source " +
      quoted((work / "warmup").string()) + " --images " + std::to_string(a.images) + " 2>" +
      quoted(log.string());
  Yolov5Result r;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) {
    r.skip = "cannot start " + python;
    return r;
  }
  char line[4096];
  while (std::fgets(line, sizeof(line), f)) {
    int b = 0;
    double ms = 0;
    const std::string s(line);
    if (std::sscanf(line, "yolov5_model batch=%d ms_per_batch=%lf", &b, &ms) == 2) {
      r.model_ms.emplace_back(b, ms);
    } else if (std::sscanf(line, "yolov5_detect ms_per_image=%lf", &ms) == 1) {
      r.detect_ms = ms;
    } else if (s.rfind("yolov5_skip reason=", 0) == 0) {
      r.skip = s.substr(19, s.find_last_not_of("\r\n") - 18);
    }
  }
  const int status = ::pclose(f);
  if (r.skip.empty() && (status != 0 || r.detect_ms < 0)) {
    r.skip = python + " scripts/bench_infer_yolov5.py failed: " + last_line(log) +
             (a.out.empty() ? " (--out DIR keeps its log)" : " (its log: " + log.string() + ")");
  }
  return r;
}

void detect_table(const BenchArgs& a, const Prepared& p, const Yolov5Result& y5,
                  const fs::path& work, Failures& fail) {
  std::printf(
      "\ndetect, end to end (%s, %d JPEGs 1080x810, imgsz %d, conf 0.25, iou 0.45, nothing saved; "
      "wall time / images, model load included, after a 2-image warm-up run):\n",
      a.device == "cpu" ? "CPU" : ("CUDA " + a.device + "; ONNX on the CPU").c_str(), a.images,
      a.imgsz);
  const fs::path b1 = batch_dir(work, 1);
  std::vector<std::string> formats = {".pt", ".torchscript"};
  if (onnx_enabled()) formats.push_back(".onnx");
  double ours_pt = -1;
  for (const std::string& f : formats) {
    const std::string name = "ours detect (" + f + ")";
    try {
      const std::string w = with_suffix(b1, p, f.c_str()).string();
      const double ms = detect_ms(a, w, f == ".pt" ? p.cfg : "", work);
      if (f == ".pt") ours_pt = ms;
      std::printf("  %-28s %8.2f ms/image %8.2f images/s\n", name.c_str(), ms, 1000.0 / ms);
      std::fflush(stdout);
    } catch (const std::exception& e) {
      fail.row(28, name, "", e);
    }
  }
  if (!onnx_enabled()) {
    std::printf("  %-28s skipped (no ONNX in this build)\n", "ours detect (.onnx)");
  }
  if (!y5.skip.empty() || y5.detect_ms <= 0) {
    std::printf("  %-28s skipped: %s\n", "YOLOv5 7.0 detect.py (.pt)", y5.skip.c_str());
    return;
  }
  std::printf("  %-28s %8.2f ms/image %8.2f images/s\n", "YOLOv5 7.0 detect.py (.pt)", y5.detect_ms,
              1000.0 / y5.detect_ms);
  if (ours_pt > 0) {
    std::printf("  ours (.pt) / YOLOv5: %.2f (< 1: ours is faster)\n", ours_pt / y5.detect_ms);
  }
}

int bench(const BenchArgs& a, bool cfg_given) {
  if (a.threads > 0) torch::set_num_threads(a.threads);
  const int threads = at::get_num_threads();
  std::printf("%s\n", machine_line(threads).c_str());
  const WorkDir work(a.out);
  yolo::set_log_enabled(false);  // the export's and detect's own lines; errors still print
  const Prepared p = prepare_weights(a, cfg_given, work.path());
  Failures fail;
  export_all(a, p, work.path(), fail);
  write_images(work.path() / "images", work.path() / "warmup", a.images);
  our_throughput(a, p, work.path(), fail);
  std::printf("  (running YOLOv5 with %s ...)\n", python_of(a).c_str());
  std::fflush(stdout);
  const Yolov5Result y5 = run_yolov5(a, p, threads, work.path());
  if (y5.model_ms.empty()) {
    std::printf("  %-24s skipped: %s\n", "YOLOv5 7.0 (PyTorch)", y5.skip.c_str());
  }
  for (const auto& [b, ms] : y5.model_ms) throughput_row("YOLOv5 7.0 (PyTorch)", b, ms);
  detect_table(a, p, y5, work.path(), fail);
  if (!a.out.empty()) std::printf("work folder kept: %s\n", work.path().c_str());
  yolo::set_log_enabled(true);
  std::fflush(stdout);
  if (fail.count > 0) {
    std::fprintf(stderr, "bench_infer: %d measurement(s) failed: see the rows above\n", fail.count);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return yolo::run_app("bench_infer", [&] {
    const yolo::cli::Parsed<BenchArgs> p = yolo::cli::parse(flags(), argc, argv, "bench_infer");
    if (p.help) {
      std::cout << yolo::cli::help_text(yolo::cli::specs_of(flags()),
                                        "Inference speed on the CPU: .pt, .torchscript and .onnx "
                                        "beside YOLOv5 7.0's model and detect.py",
                                        "bench_infer", yolo::version_help());
      return 0;
    }
    if (p.version) {
      std::cout << yolo::version_report();
      return 0;
    }
    const std::string bad = yolo::cli::first_bad_value(flags(), p.values);
    if (!bad.empty()) throw yolo::UsageError(bad);
    BenchArgs a = p.values;
    a.imgsz = yolo::check_img_size(a.imgsz, 32);
    return bench(a, p.was_given("cfg"));
  });
}

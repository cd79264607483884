#include "utils/export/export_main.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "utils/core/app_main.h"
#include "utils/core/cli.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/device.h"
#include "utils/core/stopwatch.h"
#include "utils/eval/model_family.h"
#include "utils/eval/model_loader.h"
#include "utils/export/export_graph.h"
#include "utils/export/export_metadata.h"
#include "utils/export/onnx_export.h"
#include "utils/export/torchscript_export.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {

const std::vector<cli::Flag<ExportArgs>>& flags() {
  using A = ExportArgs;
  using cli::at_least;
  using cli::Bind;
  static const std::vector<cli::Flag<A>> table = {
      Bind("weights", &A::weights, "model weights: ours (best.pt, last.pt) or YOLOv5's .pt")
          .metavar("PATH"),
      Bind("data", &A::data, "dataset YAML for class names (default: from the checkpoint)")
          .metavar("PATH"),
      Bind("cfg", &A::cfg, "model YAML, for weights without one (default: from the checkpoint)")
          .metavar("PATH"),
      Bind("imgsz", &A::imgsz, "image size: one number (square) or height and width")
          .alias("--img")
          .alias("--img-size")
          .check(cli::image_sizes),
      Bind("batch-size", &A::batch_size, "batch size").check(at_least(1, "must be >= 1")),
      Bind("device", &A::device, "cuda device, i.e. 0 or cpu"),
      Bind("half", &A::half, "FP16 half-precision export (CUDA only)"),
      Bind("dynamic", &A::dynamic, "ONNX: dynamic batch, height and width"),
      Bind("end2end", &A::end2end,
           "YOLO26: the one-to-one head with its top-300 selection, (B, 300, 6) detections that "
           "need no NMS (Ultralytics' nms=False)"),
      Bind("opset", &A::opset, "ONNX: opset version"),
      Bind("include", &A::include, "formats to write: torchscript, onnx").metavar("FORMAT"),
  };
  return table;
}

// export.py's formats that this program does not write, and what to do instead.
bool is_other_yolov5_format(const std::string& f) {
  static const std::vector<std::string> kOther = {
      "openvino", "engine", "coreml", "saved_model", "pb", "tflite", "edgetpu", "tfjs", "paddle"};
  return std::find(kOther.begin(), kOther.end(), f) != kOther.end();
}

std::vector<std::string> checked_formats(const ExportArgs& a) {
  std::vector<std::string> out;
  for (std::string f : a.include) {
    std::transform(f.begin(), f.end(), f.begin(), ::tolower);
    if (is_other_yolov5_format(f)) {
      throw UsageError("--include " + f +
                       ": this program writes torchscript and onnx; write onnx and convert it "
                       "with that format's own tools");
    }
    if (f != "torchscript" && f != "onnx") {
      throw UsageError("--include " + f + ": unknown format (choose from torchscript, onnx)");
    }
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  }
  if (out.empty()) throw UsageError("--include: name at least one format (torchscript, onnx)");
  const bool onnx = std::find(out.begin(), out.end(), "onnx") != out.end();
  if (onnx && (a.opset < kMinOnnxOpset || a.opset > kMaxOnnxOpset)) {
    throw UsageError("--opset " + std::to_string(a.opset) + ": this program writes opsets " +
                     std::to_string(kMinOnnxOpset) + " to " + std::to_string(kMaxOnnxOpset));
  }
  if (onnx && !onnx_export_available()) {
    throw UsageError(
        "--include onnx: this build has no ONNX library; install Debian's libonnx-dev and "
        "libprotobuf-dev (scripts/setup.sh does) and build again");
  }
  return out;
}

std::string megabytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", s);
  return buf;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

// The TorchScript module read back from its bytes, on the export's input: its largest difference
// from the model's own output, so a file that does not compute what the model does never lands.
// End to end, the rows before the top-k (`decoded`): the top-k of an image whose scores tie would
// not compare.
double torchscript_difference(const std::string& bytes, const torch::Tensor& im,
                              const torch::Tensor& expected, const torch::Device& device,
                              bool end2end) {
  std::istringstream is(bytes);
  torch::jit::Module m = torch::jit::load(is, device);
  const torch::Tensor got = m.run_method(end2end ? "decoded" : "forward", im).toTensor();
  if (got.sizes() != expected.sizes()) {
    throw std::runtime_error("the TorchScript module's output shape " +
                             shape_text(got.sizes().vec()) + " differs from the model's " +
                             shape_text(expected.sizes().vec()));
  }
  return (got.to(torch::kFloat) - expected.to(torch::kFloat)).abs().max().item<double>();
}

// A fixed-size ONNX file holds each level's grid and anchors for every image of its batch (what
// OpenCV's dnn module needs): past protobuf's 2 GB limit no ONNX file can hold them.
void check_onnx_size(const ExportArgs& a, const std::vector<std::string>& formats,
                     const DetectionModelImpl& model, int64_t rows) {
  if (a.dynamic || std::find(formats.begin(), formats.end(), "onnx") == formats.end()) return;
  int64_t weight_bytes = 0;
  for (const auto& p : model.parameters()) weight_bytes += p.numel() * 4;
  const int64_t per_image = rows * 4 * 4;  // grid x, y and anchor w, h per row, float32
  const int64_t room = (int64_t{1} << 31) - weight_bytes - (int64_t{64} << 20);
  if (per_image * a.batch_size <= room) return;
  throw UsageError("--batch-size " + std::to_string(a.batch_size) +
                   ": a fixed-size ONNX file holds the grid and anchors of every image of its "
                   "batch, " +
                   megabytes(static_cast<size_t>(per_image * a.batch_size)) +
                   " here, more than the 2 GB an ONNX file can hold; use at most --batch-size " +
                   std::to_string(std::max<int64_t>(room / per_image, 1)) +
                   " at this --imgsz, or --dynamic (any batch)");
}

void check_sizes(const ExportArgs& a) {
  if (a.imgsz.empty() || a.imgsz.size() > 2) {
    throw UsageError("--imgsz: one number (square) or two (height width), got " +
                     std::to_string(a.imgsz.size()));
  }
  for (int s : a.imgsz) {
    if (s < 1) throw UsageError("--imgsz: sizes must be >= 1, got " + std::to_string(s));
  }
  if (a.batch_size < 1) throw UsageError("--batch-size: must be >= 1");
}

// --end2end: the one-to-one head, which only end-to-end models (YOLO26) have.
void select_head(const ExportArgs& a, DetectionModelImpl& model) {
  if (!a.end2end) return;
  if (!model.head().has_end2end()) {
    throw UsageError("--end2end: " + a.weights +
                     " has no one-to-one (end-to-end) head, which YOLO26's models have; export "
                     "it without --end2end (its output then needs NMS)");
  }
  model.head().select_for_inference(true);
}

}  // namespace

ExportResult run_export(const ExportArgs& a) {
  const std::vector<std::string> formats = checked_formats(a);
  check_sizes(a);
  const DeviceSelection dev = select_device(a.device);
  if (a.half && !dev.device.is_cuda()) {
    throw UsageError("--half: float16 export needs a CUDA device (--device 0), as YOLOv5's");
  }
  if (a.half && a.dynamic) {
    throw UsageError("--half: not compatible with --dynamic; use one or the other, as YOLOv5's");
  }
  const Stopwatch total;
  LoadedModel lm = load_model_for_inference(a.weights, a.cfg, a.data);
  const bool ultralytics = model_family(*lm.model).export_layout == ExportLayout::kUltralytics;
  select_head(a, *lm.model);
  lm.model->eval();
  lm.model->fuse();
  lm.model->to(dev.device, a.half ? torch::kHalf : torch::kFloat);
  const int gs = lm.model->max_stride();
  const int h = check_img_size(a.imgsz[0], gs);
  const int w = check_img_size(a.imgsz.size() > 1 ? a.imgsz[1] : a.imgsz[0], gs);
  const std::vector<int64_t> in_shape = {a.batch_size, 3, h, w};

  torch::NoGradGuard no_grad;
  // One image traces the model and checks the TorchScript file: --batch-size only sets the
  // files' input shape, so a large one allocates nothing here.
  const torch::Tensor im = torch::zeros(
      {1, 3, h, w},
      torch::TensorOptions().device(dev.device).dtype(a.half ? torch::kHalf : torch::kFloat));
  // The files' layout: YOLOv5's rows, or Ultralytics' (B, 4 + nc, N) without the objectness of 1.
  torch::Tensor y = lm.model->forward(im).pred;
  if (ultralytics) y = torch::cat({y.slice(2, 0, 4), y.slice(2, 5)}, 2).transpose(1, 2);
  ExportResult result;
  result.output_shape = y.sizes().vec();
  result.output_shape[0] = a.batch_size;
  if (a.end2end) result.output_shape = {a.batch_size, std::min<int64_t>(300, y.size(2)), 6};
  const fs::path weights(a.weights);
  // A released name (yolov5s.pt) was read from the download cache; its files go beside the name.
  log_info("PyTorch: starting from " + one_line(lm.file) + " with output shape " +
           shape_text(result.output_shape) + " (" + megabytes(fs::file_size(lm.file)) + ")");

  check_onnx_size(a, formats, *lm.model, y.size(ultralytics ? 2 : 1));
  const ExportGraph graph = lower_model(*lm.model);
  ExportDescription desc;
  desc.model = weights.stem().string();
  desc.names = lm.names;
  desc.stride = gs;
  desc.batch = a.batch_size;
  desc.height = h;
  desc.width = w;
  desc.half = a.half;
  desc.dynamic = a.dynamic;
  desc.end2end = a.end2end;
  for (const std::string& f : formats) {
    const Stopwatch t;
    std::string bytes, path, what;
    if (f == "torchscript") {
      TorchScriptOptions o;
      o.shape = in_shape;
      o.stride = gs;
      o.names = lm.names;
      o.device = dev.device;
      o.half = a.half;
      if (ultralytics) o.config_json = ultralytics_config_json(desc);
      bytes = torchscript_bytes(graph, o);
      const double diff = torchscript_difference(bytes, im, y, dev.device, graph.head.end2end);
      const double scale = std::max(1.0, y.abs().max().item<double>());
      if (!(diff <= (a.half ? 1e-2 : 1e-5) * scale)) {
        throw std::runtime_error("the TorchScript module differs from the model by " +
                                 std::to_string(diff) + ": nothing written");
      }
      path = (weights.parent_path() / (weights.stem().string() + ".torchscript")).string();
      what = "TorchScript";
    } else {
      OnnxOptions o;
      o.opset = a.opset;
      o.dynamic = a.dynamic;
      o.half = a.half;
      o.batch = a.batch_size;
      o.height = h;
      o.width = w;
      o.stride = gs;
      o.names = lm.names;
      if (ultralytics) o.metadata = ultralytics_onnx_metadata(desc);
      bytes = onnx_model_bytes(graph, o);
      path = (weights.parent_path() / (weights.stem().string() + ".onnx")).string();
      what = "ONNX (opset " + std::to_string(a.opset) + (a.dynamic ? ", dynamic" : "") + ")";
    }
    write_file_atomic(path, bytes);
    log_info(what + ": export success " + seconds(t.seconds()) + ", saved as " + one_line(path) +
             " (" + megabytes(bytes.size()) + ")");
    result.files.push_back(path);
  }
  std::error_code ec;
  const std::string dir = fs::absolute(weights.parent_path(), ec).lexically_normal().string();
  std::string next =
      "Export complete (" + seconds(total.seconds()) + ")\nResults saved to " + one_line(dir);
  const std::string example = shell_word(result.files.back());
  const std::string size =
      " --imgsz " + std::to_string(h) + (h != w ? " " + std::to_string(w) : std::string());
  // An exported file names no dataset: val is told the one the weights were trained on.
  const std::string data = !a.data.empty() ? a.data : lm.data;
  next += "\nDetect:          " + shell_word(sibling_program("detect")) + " --weights " + example +
          size + " --source IMAGES";
  next += "\nValidate:        " + shell_word(sibling_program("val")) + " --weights " + example +
          size + " --data " + (data.empty() ? std::string("DATA.yaml") : shell_word(data));
  if (ultralytics) {
    next += "\nUltralytics:     yolo predict model=" + example + " imgsz=" +
            (h == w ? std::to_string(h) : "[" + std::to_string(h) + "," + std::to_string(w) + "]");
  } else {
    next += "\nYOLOv5 (Python): python detect.py --weights " + example + size;
  }
  log_info(next);
  return result;
}

int export_main(int argc, char** argv) {
  return run_app("export", [&] {
    const cli::Parsed<ExportArgs> p = cli::parse(flags(), argc, argv, "export");
    if (p.help) {
      std::cout << cli::help_text(cli::specs_of(flags()),
                                  "Export weights to TorchScript and ONNX (YOLOv5 v7.0 export.py "
                                  "flags)",
                                  "export", version_help());
      return 0;
    }
    if (p.version) {
      std::cout << version_report();
      return 0;
    }
    const std::string bad = cli::first_bad_value(flags(), p.values);
    if (!bad.empty()) throw UsageError(bad);
    run_export(p.values);
    return 0;
  });
}

}  // namespace yolo

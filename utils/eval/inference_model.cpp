#include "utils/eval/inference_model.h"

#include <torch/script.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#ifdef YOLO_WITH_OPENCV_DNN
#include <opencv2/dnn.hpp>
#endif

#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/io/torch_archive.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/eval/model_loader.h"
#include "utils/eval/onnx_info.h"

namespace yolo {

struct InferenceModel::Script {
  torch::jit::Module module;
  bool half = false;
};

struct InferenceModel::Onnx {
#ifdef YOLO_WITH_OPENCV_DNN
  cv::dnn::Net net;
#endif
};

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

// Metadata read from an exported file is input: a stride that is no power of two, a shape that is
// not a positive multiple of it, or no class names are refused naming the file and the key.
void check_metadata(const std::string& file, const std::string& where, int64_t stride,
                    const std::vector<std::string>& names, int64_t h, int64_t w) {
  if (stride < 1 || stride > 256 || (stride & (stride - 1)) != 0) {
    throw std::runtime_error(file + ": " + where + "key 'stride' is " + std::to_string(stride) +
                             ", not a power of two from 1 to 256 (YOLOv5's models have 32 or "
                             "64); export the file again");
  }
  if (names.empty()) {
    throw std::runtime_error(file + ": " + where + "key 'names' lists no classes");
  }
  if (names.size() > 100000) {
    throw std::runtime_error(file + ": " + where + "key 'names' lists " +
                             std::to_string(names.size()) + " classes, more than 100000");
  }
  for (const int64_t v : {h, w}) {
    if (v < 0 || v > 65536 || (v > 0 && v % stride != 0)) {
      throw std::runtime_error(file + ": " + where + "its input size " + std::to_string(h) + "x" +
                               std::to_string(w) + " is not a multiple of its stride " +
                               std::to_string(stride) + " from " + std::to_string(stride) +
                               " to 65536; export the file again");
    }
  }
}

// A whole decimal number, or nullopt: "00" is 0 and "32abc" is nothing.
std::optional<int64_t> parse_integer(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  size_t i = text[0] == '-' ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  for (size_t j = i; j < text.size(); ++j) {
    if (text[j] < '0' || text[j] > '9') return std::nullopt;
  }
  return std::stoll(text);
}

}  // namespace

WeightsFormat weights_format(const std::string& path) {
  const std::string p = lower(path);
  if (ends_with(p, ".torchscript")) return WeightsFormat::kTorchScript;
  if (ends_with(p, ".onnx")) return WeightsFormat::kOnnx;
  return WeightsFormat::kPyTorch;
}

const char* format_name(WeightsFormat f) {
  switch (f) {
    case WeightsFormat::kTorchScript:
      return "TorchScript";
    case WeightsFormat::kOnnx:
      return "ONNX";
    default:
      return "PyTorch";
  }
}

bool onnx_runtime_available() {
#ifdef YOLO_WITH_OPENCV_DNN
  return true;
#else
  return false;
#endif
}

torch::Tensor rows_from_channels_first(const torch::Tensor& y) {
  const torch::Tensor t = y.transpose(1, 2);
  return torch::cat(
      {t.slice(2, 0, 4), torch::ones({t.size(0), t.size(1), 1}, t.options()), t.slice(2, 4)}, 2);
}

torch::Tensor rows_from_detections(const torch::Tensor& y, int64_t nc) {
  const torch::Tensor x1y1 = y.slice(2, 0, 2), x2y2 = y.slice(2, 2, 4), score = y.slice(2, 4, 5);
  // A class index outside 0..nc-1 (a file of other classes) must not write out of bounds.
  const torch::Tensor cls = y.slice(2, 5, 6).round().clamp(0, nc - 1).to(torch::kLong);
  const torch::Tensor scores =
      torch::zeros({y.size(0), y.size(1), nc}, y.options()).scatter_(2, cls, score);
  return torch::cat({(x1y1 + x2y2) * 0.5, x2y2 - x1y1, torch::ones_like(score), scores}, 2);
}

void InferenceModel::check_task(const std::string& weights, const std::string& task) {
  if (task != "detect") {
    throw std::runtime_error(weights + ": an Ultralytics '" + one_line(task) +
                             "' model; val and detect run detection models (task 'detect')");
  }
  channels_first_ = true;
}

bool InferenceModel::anchor_free() const {
  return model_ ? model_->spec().anchor_free : channels_first_;
}

InferenceModel::~InferenceModel() = default;
InferenceModel::InferenceModel(InferenceModel&&) noexcept = default;

InferenceModel::InferenceModel(const std::string& weights, const InferenceOptions& o)
    : format_(weights_format(weights)), device_(o.device) {
  if (format_ == WeightsFormat::kPyTorch) {
    load_pytorch(weights, o);
    return;
  }
  if (const std::string why = file_problem(weights); !why.empty()) {
    throw UsageError("--weights: '" + weights + "' " + why);
  }
  if (o.augment) {
    throw UsageError(std::string("--augment: test-time augmentation runs .pt weights; ") + weights +
                     " is a " + format_name(format_) + " file");
  }
  if (!o.cfg.empty()) log_warn("--cfg is ignored for " + weights + ": the file holds its model");
  if (o.half) {
    log_warn("half precision applies to .pt weights: " + weights +
             " runs as exported (export with --half for a float16 file)");
  }
  if (format_ == WeightsFormat::kTorchScript) {
    load_torchscript(weights);
  } else {
    load_onnx(weights);
  }
  if (o.end2end && !end2end_) {
    throw UsageError(std::string("--end2end: ") + weights +
                     " was exported without --end2end (its " + format_name(format_) +
                     " output needs NMS); export the .pt with --end2end for the one-to-one head, "
                     "or leave out --end2end");
  }
  if (names_.empty()) throw std::runtime_error(weights + ": its metadata names no classes");
}

void InferenceModel::load_pytorch(const std::string& weights, const InferenceOptions& o) {
  LoadedModel lm = load_model_for_inference(weights, o.cfg, o.data);
  model_ = lm.model;
  if (o.end2end && !model_->head().has_end2end()) {
    throw UsageError("--end2end: " + weights +
                     " has no one-to-one (end-to-end) head; end-to-end models (YOLO26) run "
                     "without NMS, others with it (leave out --end2end)");
  }
  if (o.augment && o.end2end) {
    throw UsageError(
        "--end2end and --augment: test-time augmentation merges boxes with NMS; use "
        "one of them");
  }
  model_->head().select_for_inference(o.end2end);
  end2end_ = o.end2end;
  model_->eval();
  if (o.fuse) model_->fuse();
  model_->to(device_);
  if (o.half) {
    if (!device_.is_cuda()) {
      throw UsageError("half precision runs on a CUDA device only (this run is on " +
                       device_.str() + ")");
    }
    model_->to(torch::kHalf);
    half_ = true;
  }
  if (device_.is_cpu()) to_channels_last(*model_);  // faster convolutions on the CPU
  augment_ = o.augment;
  names_ = lm.names;
  stride_ = model_->max_stride();
  data_ = lm.data;
  single_cls_ = lm.single_cls;
}

// YOLOv5's config.txt: {"shape": [...], "stride": 32, "names": {"0": ...} or [...]}; "dynamic":
// true (ours) when the module takes any size.
void InferenceModel::load_torchscript(const std::string& weights) {
  torch::jit::ExtraFilesMap extra = {{"config.txt", ""}};
  script_ = std::make_unique<Script>();
  // Checked first (the bytes are dropped again): LibTorch's loader allocates what each zip
  // member's header claims.
  read_torch_zip_bytes(weights, "TorchScript file", "");
  try {
    script_->module = torch::jit::load(weights, device_, extra);
  } catch (const c10::Error& e) {
    throw std::runtime_error(weights + ": not a TorchScript file LibTorch can load (" +
                             std::string(e.what_without_backtrace()).substr(0, 200) + ")");
  }
  script_->module.eval();
  for (const auto& p : script_->module.parameters()) {
    script_->half = p.scalar_type() == torch::kHalf;
    break;
  }
  // On the CPU, channels-last weights and images take oneDNN's faster convolutions (about
  // 1.7x for yolov5n at 640 px on 2 cores), as the .pt model does.
  if (device_.is_cpu()) {
    torch::NoGradGuard no_grad;
    for (auto p : script_->module.parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  if (extra["config.txt"].empty()) {
    throw std::runtime_error(weights +
                             ": no config.txt (stride, names) in this TorchScript file; write "
                             "it with export or YOLOv5's export.py");
  }
  int64_t stride = 0;
  std::string task;
  try {
    const YAML::Node c = YAML::Load(extra["config.txt"]);
    if (!c.IsMap()) throw std::runtime_error("not a mapping");
    if (!c["stride"] || !c["names"]) throw std::runtime_error("no 'stride' or no 'names'");
    const auto s = parse_integer(c["stride"].IsScalar() ? c["stride"].Scalar() : "");
    if (!s) throw std::runtime_error("key 'stride' is not a whole number");
    stride = *s;
    const YAML::Node names = c["names"];
    if (names.IsSequence()) {
      for (const auto& n : names) names_.push_back(n.as<std::string>());
    } else if (names.IsMap()) {
      std::map<int, std::string> by_key;
      for (const auto& kv : names) by_key[kv.first.as<int>()] = kv.second.as<std::string>();
      for (const auto& [k, v] : by_key) {
        const int want = static_cast<int>(names_.size());
        if (k != want) throw std::runtime_error("key 'names' has no class " + std::to_string(want));
        names_.push_back(v);
      }
    } else {
      throw std::runtime_error("key 'names' is not a list or a mapping of class names");
    }
    if (c["task"]) task = c["task"].as<std::string>();
    end2end_ = c["end2end"] && c["end2end"].as<bool>();
    const bool dynamic = c["dynamic"] && c["dynamic"].as<bool>();
    if (!dynamic && c["shape"] && c["shape"].IsSequence() && c["shape"].size() == 4) {
      fixed_h_ = c["shape"][2].as<int64_t>();
      fixed_w_ = c["shape"][3].as<int64_t>();
    }
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(weights + ": its config.txt is not YOLOv5's or Ultralytics' " +
                             "{shape, stride, names} (" + e.msg + ")");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(weights + ": its config.txt is not YOLOv5's or Ultralytics' " +
                             "{shape, stride, names} (" + e.what() + ")");
  }
  if (!task.empty()) check_task(weights, task);
  check_metadata(weights, "config.txt ", stride, names_, fixed_h_, fixed_w_);
  stride_ = static_cast<int>(stride);
}

// Names and stride from the metadata, the input shape from the graph, then OpenCV's dnn module.
void InferenceModel::load_onnx(const std::string& weights) {
  const OnnxInfo info = read_onnx_info(weights);
  const auto stride = info.metadata.find("stride");
  const auto names = info.metadata.find("names");
  if (stride == info.metadata.end() || names == info.metadata.end()) {
    throw std::runtime_error(weights +
                             ": no 'stride' and 'names' metadata; export the file with "
                             "export or YOLOv5's export.py");
  }
  if (const auto task = info.metadata.find("task"); task != info.metadata.end()) {
    check_task(weights, task->second);
  }
  const auto end2end = info.metadata.find("end2end");
  end2end_ = end2end != info.metadata.end() && end2end->second == "True";
  const auto s = parse_integer(stride->second);
  if (!s) {
    throw std::runtime_error(weights + ": metadata key 'stride' is '" + one_line(stride->second) +
                             "', not a whole number; export the file again");
  }
  try {
    names_ = parse_python_names(names->second);
  } catch (const std::exception& e) {
    throw std::runtime_error(weights + ": metadata key 'names': " + e.what());
  }
  if (info.input_shape.size() != 4 || info.input_shape[1] != 3) {
    throw std::runtime_error(weights + ": its input is not (batch, 3, height, width)");
  }
  check_metadata(weights, "metadata ", *s, names_, info.input_shape[2], info.input_shape[3]);
  stride_ = static_cast<int>(*s);
  if (info.input_elem_type != 1) {
    throw std::runtime_error(weights +
                             ": its input is not float32 (a --half export); OpenCV's dnn module "
                             "runs float32 ONNX files");
  }
  fixed_batch_ = info.input_shape[0];
  fixed_h_ = info.input_shape[2];
  fixed_w_ = info.input_shape[3];
#ifdef YOLO_WITH_OPENCV_DNN
  onnx_ = std::make_unique<Onnx>();
  try {
    onnx_->net = cv::dnn::readNetFromONNX(weights);
  } catch (const cv::Exception& e) {
    if (end2end_) {
      throw std::runtime_error(
          weights +
          ": OpenCV " CV_VERSION
          "'s dnn module cannot run this end-to-end graph (it has no TopK "
          "or GatherElements layer; ONNX Runtime runs it); use the .torchscript export, the .pt "
          "with --end2end, or an export without --end2end");
    }
    throw std::runtime_error(weights + ": OpenCV's dnn module cannot read it (" + e.msg +
                             "); a --dynamic export needs ONNX Runtime, export without it");
  }
  onnx_->net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  onnx_->net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  if (!device_.is_cpu()) log_info(weights + ": ONNX runs on the CPU (OpenCV's dnn module)");
#else
  throw std::runtime_error(weights +
                           ": this build has no OpenCV dnn module, which runs ONNX files; install "
                           "Debian's libopencv-dev (with libopencv-dnn-dev) and build again, or "
                           "use the .pt or .torchscript file");
#endif
}

// An exported file's rows must hold 5 + the classes its metadata names.
torch::Tensor InferenceModel::checked(const torch::Tensor& out) const {
  if (end2end_) {
    if (out.dim() != 3 || out.size(2) != 6) {
      throw std::runtime_error(std::string(format_name(format_)) + " output of shape " +
                               c10::str(out.sizes()) +
                               " is not the (batch, k, 6) detections its metadata's end2end says");
    }
    return rows_from_detections(out, nc());
  }
  if (channels_first_ && (out.dim() != 3 || out.size(1) != nc() + 4)) {
    throw std::runtime_error(std::string(format_name(format_)) + " output of shape " +
                             c10::str(out.sizes()) + " does not hold 4 + " + std::to_string(nc()) +
                             " channels (Ultralytics' layout) for the " + std::to_string(nc()) +
                             " class names in the file");
  }
  const torch::Tensor pred = channels_first_ ? rows_from_channels_first(out) : out;
  if (pred.dim() != 3 || pred.size(2) != nc() + 5) {
    throw std::runtime_error(std::string(format_name(format_)) + " output of shape " +
                             c10::str(pred.sizes()) + " does not hold 5 + " + std::to_string(nc()) +
                             " columns for the " + std::to_string(nc()) +
                             " class names in the file");
  }
  return pred;
}

torch::Tensor InferenceModel::predict(const torch::Tensor& images) {
  if ((fixed_h_ && images.size(2) != fixed_h_) || (fixed_w_ && images.size(3) != fixed_w_)) {
    throw std::runtime_error("this " + std::string(format_name(format_)) +
                             " file takes images of " + std::to_string(fixed_h_) + "x" +
                             std::to_string(fixed_w_) + ", got " + std::to_string(images.size(2)) +
                             "x" + std::to_string(images.size(3)));
  }
  if (format_ == WeightsFormat::kPyTorch) {
    const torch::Tensor x = half_ ? images.to(torch::kHalf) : images;
    return (augment_ ? model_->forward_augment(x) : model_->forward(x).pred).to(torch::kFloat);
  }
  if (format_ == WeightsFormat::kTorchScript) {
    torch::Tensor x = script_->half ? images.to(torch::kHalf) : images;
    if (device_.is_cpu()) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    c10::IValue y = script_->module.forward({x});
    // YOLOv5's export.py saves a module that returns a tuple whose first element is the
    // predictions: its own loader takes that element, and so does this one.
    if (y.isTuple() && !y.toTupleRef().elements().empty()) y = y.toTupleRef().elements()[0];
    if (y.isList() && !y.toListRef().empty()) y = y.toListRef()[0];
    if (!y.isTensor()) {
      throw std::runtime_error("the TorchScript module returns a " + y.tagKind() +
                               ", not a tensor of predictions");
    }
    return checked(y.toTensor().to(torch::kFloat));
  }
#ifdef YOLO_WITH_OPENCV_DNN
  // A fixed batch runs in chunks of that size, the last one padded.
  const torch::Tensor host = images.to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t n = host.size(0), chunk = fixed_batch_ > 0 ? fixed_batch_ : n;
  std::vector<torch::Tensor> out;
  for (int64_t b = 0; b < n; b += chunk) {
    torch::Tensor part = host.slice(0, b, std::min(n, b + chunk));
    const int64_t real = part.size(0);
    if (real < chunk) {
      part = torch::cat(
          {part, torch::zeros({chunk - real, host.size(1), host.size(2), host.size(3)})});
    }
    part = part.contiguous();
    const int sizes[4] = {static_cast<int>(part.size(0)), static_cast<int>(part.size(1)),
                          static_cast<int>(part.size(2)), static_cast<int>(part.size(3))};
    onnx_->net.setInput(cv::Mat(4, sizes, CV_32F, part.data_ptr<float>()));
    const cv::Mat y = onnx_->net.forward();
    if (y.dims != 3 || !y.isContinuous()) {
      throw std::runtime_error("the ONNX model's output is not (batch, rows, 5 + classes)");
    }
    out.push_back(torch::from_blob(y.data, {y.size[0], y.size[1], y.size[2]}, torch::kFloat)
                      .slice(0, 0, real)
                      .clone());
  }
  return checked(torch::cat(out).to(images.device()));
#else
  throw std::runtime_error("this build has no OpenCV dnn module to run ONNX files");
#endif
}

}  // namespace yolo

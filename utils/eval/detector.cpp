#include "yolo/detector.h"

#include <torch/torch.h>

#include <algorithm>
#include <opencv2/imgproc.hpp>

#include "data/augment.h"
#include "utils/core/cli.h"
#include "utils/core/cpu_threads.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/device.h"
#include "utils/eval/boxes.h"
#include "utils/eval/inference_model.h"
#include "utils/eval/model_family.h"
#include "utils/eval/nms.h"

namespace yolo {

namespace {
InferenceModel load(const std::string& weights, const DetectorOptions& o, torch::Device device) {
  InferenceOptions io;
  io.cfg = o.cfg;
  io.data = o.data.empty() ? "" : resolve_config(o.data, ConfigKind::kData, "data");
  io.device = device;
  io.half = o.half;
  io.augment = o.augment;
  io.end2end = o.end2end;
  return InferenceModel(weights, io);
}

void check_options(const DetectorOptions& o) {
  auto bad = [](const std::string& what) { throw UsageError("Detector options: " + what); };
  if (!(o.conf_thres >= 0 && o.conf_thres <= 1)) bad("conf_thres must be in [0, 1]");
  if (!(o.iou_thres <= 1)) bad("iou_thres must be in [0, 1] (or < 0: the model family's)");
  if (o.max_det < 1) bad("max_det must be >= 1");
  if (o.imgsz < 1) bad("imgsz must be >= 1");
  if (o.imgsz_width < 0) bad("imgsz_width must be >= 0");
}
}  // namespace

// Silences info lines while it lives (warnings and errors still print).
class QuietInfo {
 public:
  explicit QuietInfo(bool quiet) : was_(info_enabled()) {
    if (quiet) set_info_enabled(false);
  }
  ~QuietInfo() { set_info_enabled(was_); }

 private:
  bool was_;
};

struct Detector::Impl {
  Impl(const std::string& weights, const DetectorOptions& o)
      : dev(select_device(o.device)), model(load(weights, o, dev.device)) {
    fixed = model.fixed_height() > 0;
    const int h = check_img_size(o.imgsz, model.stride());
    const int w = o.imgsz_width > 0 ? check_img_size(o.imgsz_width, model.stride()) : h;
    shape = fixed ? cv::Size(static_cast<int>(model.fixed_width()),
                             static_cast<int>(model.fixed_height()))
                  : cv::Size(w, h);
    if (fixed && (shape.width != w || shape.height != h)) {
      log_info(weights + " takes " + std::to_string(shape.height) + "x" +
               std::to_string(shape.width) + " images: image size " + std::to_string(h) + "x" +
               std::to_string(w) + " is not used");
    }
    nms.conf_thres = o.conf_thres;
    nms.iou_thres =
        o.iou_thres >= 0 ? o.iou_thres : model_family_of(model.anchor_free()).predict_iou;
    nms.max_det = o.max_det;
    nms.classes = o.classes;
    nms.agnostic = o.agnostic_nms;
    nms.end2end = model.end2end();
  }

  // Letterboxes `images` to one input shape (the minimal stride-multiple padding when they share
  // a size and the model takes any size; the full square otherwise), runs the model and NMS, and
  // maps each image's boxes back to its own pixels.
  std::vector<std::vector<Detection>> run(const std::vector<cv::Mat>& images) {
    if (images.empty()) return {};
    cpu_threads_tick();  // adapts only where the program started it (detect does)
    bool same = true;
    for (const cv::Mat& im : images) {
      if (im.empty() || im.type() != CV_8UC3) {
        throw UsageError("Detector::detect: images must be non-empty 8-bit BGR (CV_8UC3)");
      }
      same = same && im.size() == images[0].size();
    }
    const bool auto_pad = !fixed && same;
    std::vector<LetterboxResult> boxes;
    std::vector<at::Tensor> batch;
    for (const cv::Mat& im : images) {
      boxes.push_back(letterbox(im, shape, auto_pad, false, true, model.stride()));
      cv::Mat rgb;
      cv::cvtColor(boxes.back().image, rgb, cv::COLOR_BGR2RGB);
      batch.push_back(torch::from_blob(rgb.data, {rgb.rows, rgb.cols, 3}, torch::kUInt8)
                          .permute({2, 0, 1})
                          .clone());
    }
    torch::NoGradGuard no_grad;
    const at::Tensor x = torch::stack(batch).to(dev.device).to(torch::kFloat).div(255);
    const std::vector<at::Tensor> dets = non_max_suppression(model.predict(x), nms);
    std::vector<std::vector<Detection>> out(images.size());
    for (size_t i = 0; i < images.size(); ++i) {
      at::Tensor det = dets[i].to(torch::kCPU, torch::kFloat).contiguous();
      if (det.size(0) == 0) continue;
      at::Tensor b = det.slice(1, 0, 4);
      scale_boxes(b, boxes[i].ratio_w, boxes[i].pad_w, boxes[i].pad_h, images[i].rows,
                  images[i].cols);
      const auto a = det.accessor<float, 2>();
      for (int64_t k = 0; k < det.size(0); ++k) {
        out[i].push_back({a[k][0], a[k][1], a[k][2], a[k][3], a[k][4], static_cast<int>(a[k][5])});
      }
    }
    return out;
  }

  DeviceSelection dev;
  InferenceModel model;
  bool fixed = false;
  cv::Size shape;
  NmsOptions nms;
};

Detector::Detector(const std::string& weights, const DetectorOptions& options) {
  check_options(options);
  const QuietInfo quiet(!options.verbose);
  impl_ = std::make_unique<Impl>(weights, options);
}

Detector::~Detector() = default;
Detector::Detector(Detector&&) noexcept = default;
Detector& Detector::operator=(Detector&&) noexcept = default;

std::vector<Detection> Detector::detect(const cv::Mat& bgr) { return impl_->run({bgr})[0]; }

std::vector<std::vector<Detection>> Detector::detect(const std::vector<cv::Mat>& bgr_images) {
  return impl_->run(bgr_images);
}

const std::vector<std::string>& Detector::names() const { return impl_->model.names(); }

cv::Size Detector::input_size(cv::Size image_size) const {
  return letterbox_plan(image_size, impl_->shape, !impl_->fixed, false, true, impl_->model.stride())
      .size;
}

cv::Size Detector::input_size(const std::vector<cv::Mat>& bgr_images) const {
  if (bgr_images.empty()) return impl_->shape;
  for (const cv::Mat& im : bgr_images) {
    if (im.size() != bgr_images[0].size()) return impl_->shape;
  }
  return input_size(bgr_images[0].size());
}

int Detector::stride() const { return impl_->model.stride(); }

std::string Detector::device() const { return impl_->dev.device.str(); }

}  // namespace yolo

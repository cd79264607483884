#pragma once
// Any weights val and detect take, behind one call: PyTorch checkpoints (ours and YOLOv5's .pt),
// TorchScript files (.torchscript, with YOLOv5's config.txt) and ONNX files (.onnx, run by
// OpenCV's dnn module when the build has it). Each gives the decoded (B, N, 5 + nc) predictions
// of float images in 0..1, and its class names and stride from the file. Files with Ultralytics'
// metadata (a `task` key: ours of anchor-free models, and Ultralytics' own detection exports)
// hold (B, 4 + nc, N), read as rows with an objectness of 1.
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "models/yolo.h"

namespace yolo {

enum class WeightsFormat { kPyTorch, kTorchScript, kOnnx };

// By the file's suffix: .torchscript, .onnx, anything else a PyTorch checkpoint.
WeightsFormat weights_format(const std::string& path);
const char* format_name(WeightsFormat f);
// Whether this build runs ONNX files (OpenCV's dnn module was found).
bool onnx_runtime_available();

// Ultralytics' (B, 4 + nc, N) as (B, N, 5 + nc): xywh, an objectness of 1, the class scores.
torch::Tensor rows_from_channels_first(const torch::Tensor& y);
// An end-to-end file's (B, k, 6) detections (x1, y1, x2, y2, score, class) as (B, k, 5 + nc)
// rows: xywh, an objectness of 1, the score in its class's column and 0 elsewhere. The top-k of
// NmsOptions::end2end gives these rows' detections back.
torch::Tensor rows_from_detections(const torch::Tensor& y, int64_t nc);

struct InferenceOptions {
  std::string cfg, data;  // .pt only: override what the checkpoint says
  torch::Device device = torch::kCPU;
  bool fuse = true;      // .pt: fold BatchNorm into the convolutions
  bool half = false;     // .pt: float16 weights and inputs (CUDA only)
  bool augment = false;  // .pt: test-time augmentation (DetectionModelImpl::forward_augment)
  // .pt: the one-to-one (end-to-end) head, which YOLO26's models have; an exported file runs the
  // head it was exported with (accepted for an end-to-end export, refused for others).
  bool end2end = false;
};

class InferenceModel {
 public:
  // Throws UsageError for a missing file and std::runtime_error naming the file for one that
  // cannot be read, or a format this build cannot run.
  InferenceModel(const std::string& weights, const InferenceOptions& o);
  ~InferenceModel();
  InferenceModel(InferenceModel&&) noexcept;

  // images: float (B, 3, H, W) in 0..1 on the device. Returns float (B, N, 5 + nc) on the device.
  // A fixed-shape file takes only its own height and width (any batch: it runs in chunks).
  torch::Tensor predict(const torch::Tensor& images);

  WeightsFormat format() const { return format_; }
  const std::vector<std::string>& names() const { return names_; }
  int nc() const { return static_cast<int>(names_.size()); }
  int stride() const { return stride_; }
  // The input height and width the file is fixed to; 0 when it takes any multiple of stride().
  int64_t fixed_height() const { return fixed_h_; }
  int64_t fixed_width() const { return fixed_w_; }
  // .pt only (else null): the model, and what its checkpoint says.
  DetectionModel* pytorch() { return model_ ? &model_ : nullptr; }
  const std::string& checkpoint_data() const { return data_; }
  bool single_cls() const { return single_cls_; }
  // An anchor-free model (YOLOv8, YOLO11): a .pt's YAML says so, an exported file its layout.
  bool anchor_free() const;
  // Predictions from a one-to-one head, whose detections are its top-k (NmsOptions::end2end):
  // a .pt run with InferenceOptions::end2end, or an end-to-end export.
  bool end2end() const { return end2end_; }

 private:
  struct Script;
  struct Onnx;
  void load_pytorch(const std::string& weights, const InferenceOptions& o);
  void load_torchscript(const std::string& weights);
  void load_onnx(const std::string& weights);
  // Ultralytics' metadata names a task: detection's is read channels first, others refused.
  void check_task(const std::string& weights, const std::string& task);
  torch::Tensor checked(const torch::Tensor& pred) const;
  WeightsFormat format_;
  torch::Device device_;
  std::vector<std::string> names_;
  int stride_ = 32;
  int64_t fixed_h_ = 0, fixed_w_ = 0, fixed_batch_ = 0;
  DetectionModel model_{nullptr};
  std::string data_;
  bool single_cls_ = false;
  bool channels_first_ = false;  // Ultralytics' (B, 4 + nc, N)
  bool end2end_ = false;         // an exported file's output is then (B, k, 6) detections
  bool half_ = false;
  bool augment_ = false;
  std::unique_ptr<Script> script_;
  std::unique_ptr<Onnx> onnx_;
};

}  // namespace yolo

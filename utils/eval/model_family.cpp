#include "utils/eval/model_family.h"

#include <algorithm>
#include <cmath>

#include "utils/eval/end2end_loss.h"

namespace yolo {

namespace {

std::unique_ptr<DetectionLoss> anchor_based_loss(const DetectionModelImpl& model,
                                                 const LossConfig& c) {
  return std::make_unique<ComputeLoss>(c.anchor_based, model.nc(), model.detect()->anchors);
}

std::vector<float> level_strides(const DetectionModelImpl& model) {
  std::vector<float> strides;
  for (int s : model.strides()) strides.push_back(static_cast<float>(s));
  return strides;
}

std::unique_ptr<DetectionLoss> anchor_free_loss(const DetectionModelImpl& model,
                                                const LossConfig& c) {
  return std::make_unique<AnchorFreeLoss>(c.anchor_free, model.nc(), model.spec().reg_max,
                                          level_strides(model));
}

// YOLO26 trains both heads: the one-to-many and one-to-one assignments, L1 distances.
std::unique_ptr<DetectionLoss> end2end_loss(const DetectionModelImpl& model, const LossConfig& c) {
  return std::make_unique<End2EndLoss>(c.anchor_free, model.nc(), model.spec().reg_max,
                                       level_strides(model));
}

}  // namespace

int64_t warmup_batches(WarmupRule rule, double warmup_epochs, int epochs, int64_t nb) {
  if (rule == WarmupRule::kYolov5) {
    return std::max<int64_t>(std::llround(warmup_epochs * static_cast<double>(nb)), 100);
  }
  const double e = std::min(warmup_epochs, std::max(epochs - 1, 0) * 1.0);
  return e > 0 ? static_cast<int64_t>(std::nearbyint(e * static_cast<double>(nb))) : 0;
}

const ModelFamily& model_family(const ModelSpec& spec) {
  static const ModelFamily yolov5{"YOLOv5 (anchor-based)",
                                  {"box_loss", "obj_loss", "cls_loss"},
                                  "hyp.scratch-low.yaml",
                                  "SGD",
                                  0.6,
                                  0.65,
                                  0.45,
                                  0.1,
                                  ValProtocol::kYolov5,
                                  true,
                                  ExportLayout::kYolov5,
                                  0,
                                  &anchor_based_loss};
  static const ModelFamily anchor_free{"YOLOv8/YOLO11 (anchor-free)",
                                       {"box_loss", "cls_loss", "dfl_loss"},
                                       "hyp.anchor-free.yaml",
                                       "auto",
                                       0.7,
                                       0.7,
                                       0.7,
                                       0.0,
                                       ValProtocol::kUltralytics,
                                       false,
                                       ExportLayout::kUltralytics,
                                       10,
                                       &anchor_free_loss,
                                       WarmupRule::kUltralytics};
  static const ModelFamily end2end = [] {  // YOLOv8's and YOLO11's settings, its own loss
    ModelFamily f = anchor_free;
    f.name = "YOLO26 (end-to-end)";
    f.loss_names = {"box_loss", "cls_loss", "l1_loss"};
    f.make_loss = &end2end_loss;
    return f;
  }();
  if (!spec.anchor_free) return yolov5;
  return spec.end2end ? end2end : anchor_free;
}

const ModelFamily& model_family_of(bool anchor_free) {
  ModelSpec spec;
  spec.anchor_free = anchor_free;
  return model_family(spec);
}

}  // namespace yolo

#pragma once
// The model-family seam: what differs between YOLOv5's anchor-based models, Ultralytics'
// anchor-free YOLOv8/YOLO11 and its end-to-end YOLO26, chosen once from the model YAML. The head
// (models/head.h) decodes to one layout for NMS; the rest is here: the loss, the names of its three
// terms, the default hyperparameters, validation's NMS IoU and whether anchors are fitted
// (AutoAnchor). The trainer, validator, predictor and exporter ask the family; none tests the model
// type.
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "models/yolo.h"
#include "utils/core/io/results_csv.h"
#include "utils/eval/anchor_free_loss.h"
#include "utils/eval/loss.h"
#include "utils/eval/metrics.h"

namespace yolo {

// What a family's loss is made from: the hyp file's gains, YOLOv5's already scaled by its
// train.py rule (utils/engine/hyp.h scale_loss_gains), and the anchor-free gains as written.
struct LossConfig {
  LossGains anchor_based;
  AnchorFreeGains anchor_free;
};

// What export writes for a family: YOLOv5's (B, N, 5 + nc) rows with YOLOv5's metadata (stride,
// names), or Ultralytics' (B, 4 + nc, N) with Ultralytics' (task, imgsz, batch, args, ...), which
// Ultralytics' YOLO() reads. val and detect read both (utils/eval/inference_model.h).
enum class ExportLayout { kYolov5, kUltralytics };

// How many batches warm the learning rate, momentum and accumulation up: YOLOv5's
// max(round(warmup_epochs x nb), 100), or Ultralytics' round(min(warmup_epochs, epochs - 1) x nb),
// which has no floor and is none for a one-epoch run.
enum class WarmupRule { kYolov5, kUltralytics };
int64_t warmup_batches(WarmupRule rule, double warmup_epochs, int epochs, int64_t nb);

struct ModelFamily {
  std::string name;               // as logs print it
  LossNames loss_names;           // the loss items, in order (results.csv's columns)
  std::string default_hyp;        // bare name in hyp/, used when --hyp is not given
  std::string default_optimizer;  // when --optimizer is not given
  double val_iou = 0.6;           // NMS IoU of validation (val.py / Ultralytics' val)
  double val_iou_coco = 0.65;     // of training's final validation on COCO data (train.py's)
  double predict_iou = 0.45;      // NMS IoU of detect (detect.py's / Ultralytics' predict)
  double fitness_map50 = 0.1;     // mAP50's weight in the fitness picking best.pt (metrics.h)
  ValProtocol val_protocol = ValProtocol::kYolov5;  // whose val metrics (validator.h)
  bool fits_anchors = true;  // AutoAnchor and the anchor hyperparameters apply
  ExportLayout export_layout = ExportLayout::kYolov5;
  int close_mosaic = 0;  // epochs at the end trained without mosaic (Ultralytics' close_mosaic)
  std::unique_ptr<DetectionLoss> (*make_loss)(const DetectionModelImpl& model,
                                              const LossConfig& config) = nullptr;
  WarmupRule warmup = WarmupRule::kYolov5;
};

const ModelFamily& model_family(const ModelSpec& spec);
// For an exported file, which holds no model YAML: by its layout (InferenceModel::anchor_free).
const ModelFamily& model_family_of(bool anchor_free);
inline const ModelFamily& model_family(const DetectionModelImpl& model) {
  return model_family(model.spec());
}

}  // namespace yolo

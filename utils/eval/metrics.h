#pragma once
// Detection metrics as YOLOv5 v7.0 (utils/metrics.py, val.py): prediction-to-label matching at
// IoU 0.5:0.95, ap_per_class (101-point interpolated AP; P, R, F1 at the best mean F1),
// the confusion matrix and fitness.
#include <ATen/core/Tensor.h>

#include <vector>

namespace yolo {

// IoU thresholds 0.5, 0.55, ..., 0.95.
std::vector<double> iou_thresholds();

// val.py's process_batch: detections (n, 6) [x1, y1, x2, y2, conf, cls], labels (m, 5)
// [cls, x1, y1, x2, y2]. Returns (n, len(iouv)) bool: detection i is a true positive at IoU
// threshold j. Each label and each detection is matched at most once; as in YOLOv5, a label goes
// to the lowest-index (highest-confidence) detection of its class that passes the threshold.
at::Tensor match_predictions(const at::Tensor& detections, const at::Tensor& labels,
                             const std::vector<double>& iouv);

// How the precision envelope ends past the curve's last recall: YOLOv5 7.0 ends it at (1, 0), so
// precision falls linearly from the last point to recall 1; Ultralytics 8.x repeats the last
// recall with precision 0, a drop (its AP is the smaller when recall stops short of 1).
enum class ApTail { kYolov5, kUltralytics };

// Whose val the metrics follow. YOLOv5's: labels and predictions mapped to the original image and
// clipped to it before matching; AP's precision falls linearly to recall 1. Ultralytics 8.x's:
// matched as they are, unclipped, in the letterboxed input's pixels; AP's precision drops to 0
// after the last recall. Saved labels and JSON are in original pixels either way.
enum class ValProtocol { kYolov5, kUltralytics };

// AP of one precision/recall curve (recall ascending), 101-point interpolation.
double compute_ap(const std::vector<double>& recall, const std::vector<double>& precision,
                  std::vector<double>* pr_curve_px = nullptr, ApTail tail = ApTail::kYolov5);

struct ApResult {
  std::vector<int> classes;              // classes present in the labels, ascending
  std::vector<double> tp, fp, p, r, f1;  // per class, at the best mean-F1 confidence
  std::vector<std::vector<double>> ap;   // per class, per IoU threshold
  std::vector<double> px;                // 1000 confidence (or recall) points for curves
  std::vector<std::vector<double>> p_curve, r_curve, f1_curve, pr_curve;  // per class
  double mp = 0, mr = 0, map50 = 0, map = 0;
  double ap50(size_t k) const { return ap[k][0]; }
  double ap_mean(size_t k) const;
};

// tp: one row per prediction with a flag per IoU threshold; conf, pred_cls: per prediction;
// target_cls: one entry per label.
ApResult ap_per_class(const std::vector<std::vector<bool>>& tp, const std::vector<double>& conf,
                      const std::vector<int>& pred_cls, const std::vector<int>& target_cls,
                      ApTail tail = ApTail::kYolov5);

// The fitness that picks best.pt: map50_weight * mAP@0.5 + (1 - map50_weight) * mAP@0.5:0.95
// (YOLOv5's weight 0.1; Ultralytics' 0, mAP@0.5:0.95 alone).
double fitness(double map50, double map, double map50_weight = 0.1);

class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int nc, double conf = 0.25, double iou_thres = 0.45);
  // detections (n, 6) as above (may be undefined for "no detections"), labels (m, 5).
  void process_batch(const at::Tensor& detections, const at::Tensor& labels);
  // (nc + 1) x (nc + 1): rows predicted class (last = background), columns true class.
  const std::vector<std::vector<double>>& matrix() const { return m_; }
  int nc() const { return nc_; }

 private:
  int nc_;
  double conf_, iou_;
  std::vector<std::vector<double>> m_;
};

}  // namespace yolo

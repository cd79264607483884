#pragma once
// The validation loop of YOLOv5 v7.0's val.py: forward (eval mode), optional loss on the raw
// maps, NMS, matching against labels in original-image pixels, ap_per_class, confusion matrix,
// and the per-class results table. Used by `val` and by the trainer every epoch. On a GPU a batch
// runs on the device up to NMS and comes back to the host in one copy of its kept boxes.
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "models/yolo.h"
#include "utils/core/rank_exchange.h"
#include "utils/eval/loss.h"
#include "utils/eval/metrics.h"
#include "utils/eval/model_family.h"

namespace yolo {

struct ValConfig {
  double conf_thres = 0.001;
  double iou_thres = 0.6;
  int max_det = 300;
  // The model's one-to-one (end-to-end) head: its top-k detections without NMS (YOLO26).
  bool end2end = false;
  ValProtocol protocol = ValProtocol::kYolov5;  // the model family's
  // On CUDA the forward under float16 autocast, as YOLOv5's val with half=True (what its training
  // uses); the CPU always runs float32.
  bool half = true;
  bool nms_device_schedule = false;  // the GPU's batched NMS even on the CPU (tests)
  std::vector<std::string> names;
  bool plots = false;     // val_batch*_labels/pred.jpg, PR/F1/P/R curves, confusion matrix
  std::string save_dir;   // for plots and --save-txt / --save-json
  bool save_txt = false;  // labels/<image>.txt per image, YOLO format (+ conf with save_conf)
  bool save_conf = false;
  bool save_json = false;  // json_name in save_dir, COCO's results format (as YOLOv5)
  std::string json_name = "predictions.json";
  bool coco91 = false;   // category ids through coco80_to_coco91() (COCO data), else class index
  bool verbose = false;  // print the per-class table
  bool progress = true;  // a progress bar whose text is the table's header, as YOLOv5's
  // Validation across ranks (a collective): each rank validates its loader's contiguous share of
  // the batches (LoaderOptions::contiguous_batches) and rank 0 joins the statistics, JSON and
  // plots in batch order, so it gets, prints and writes what one process validating every batch
  // does. The other ranks write nothing (but --save-txt's files, into the same save_dir) and get
  // rank 0's headline metrics (mp, mr, map50, map, loss, seen), without per-class results.
  const RankExchange* ranks = nullptr;
};

struct ValResult {
  double mp = 0, mr = 0, map50 = 0, map = 0;
  std::array<double, 3> loss{0, 0, 0};  // box, obj, cls (when a loss was given)
  ApResult ap;
  std::vector<int> nt;  // labels per class
  int seen = 0;         // images
  std::vector<std::vector<double>> confusion;
  // Host time per image. On a GPU nothing waits for the device before NMS's copy, so the
  // inference's device time lands in ms_nms.
  double ms_pre = 0, ms_inf = 0, ms_nms = 0;
  double fitness() const { return yolo::fitness(map50, map); }
};

ValResult run_validation(DetectionModel& model, DataLoader& loader, const ValConfig& cfg,
                         const DetectionLoss* loss, const torch::Device& device);

// What else validation can run: `forward` maps float images (B, 3, H, W) on the device to their
// ModelOutput (`pred`; `raw` only where a loss is given), for a model of `nc` classes.
struct ValModel {
  std::function<ModelOutput(const at::Tensor&)> forward;
  int nc = 0;
};
ValResult run_validation(const ValModel& model, DataLoader& loader, const ValConfig& cfg,
                         const DetectionLoss* loss, const torch::Device& device);

struct DatasetConfig;

// YOLOv5's is_coco: the val split is a single list file ending in coco/val2017.txt.
bool is_coco_dataset(const DatasetConfig& dc);
// The NMS IoU of training's final validation of best.pt: YOLOv5's train.py's 0.65 on COCO, 0.60
// (val's default) elsewhere; an anchor-free model's 0.7 (Ultralytics' val) everywhere.
double final_validation_iou(const DatasetConfig& dc,
                            const ModelFamily& family = model_family(ModelSpec{}));

// val --save-json's last step, as YOLOv5's: when the dataset has annotations/instances_val2017.json
// under its path, scores the results file `json` with COCO's protocol over the validated `images`,
// prints the 12-line summary and puts its mAP50-95 and mAP50 into `res`; otherwise says that no
// COCO evaluation ran and how to get one. A malformed annotations file is an error naming it.
void evaluate_coco_json(const std::string& json, const DatasetConfig& dc,
                        const std::vector<std::string>& images, ValResult& res);

// YOLOv5's table: header, "all" row, and one row per class when `per_class`.
std::string format_val_table(const ValResult& r, const std::vector<std::string>& names,
                             bool per_class, bool header = true);

}  // namespace yolo

#pragma once
// val's entry (YOLOv5 v7.0 val.py): --task val|test validates one set of weights on a split;
// --task speed validates each --weights at YOLOv5's detection thresholds without plots; --task
// study validates each at image sizes 256-1536 and writes study_<data>_<weights>.txt and
// study.png (mAP50-95 against inference time).
#include <string>
#include <vector>

#include "utils/core/rank_exchange.h"

namespace yolo {

// val.py's flags and defaults.
struct ValArgs {
  std::vector<std::string> weights;
  std::string data, cfg;
  int imgsz = 640;
  int batch_size = 32;
  // iou_thres < 0: the model family's (0.6 for YOLOv5's models, 0.7 for anchor-free ones).
  double conf_thres = 0.001, iou_thres = -1;
  int max_det = 300;
  std::string task = "val";
  std::string device;
  int workers = 8;
  bool single_cls = false, save_txt = false, save_conf = false, save_json = false;
  std::string project = "runs/val", name = "exp";
  bool exist_ok = false, verbose = false, noplots = false, half = false, augment = false;
  bool end2end = false;   // YOLO26: the one-to-one head's top-k detections, no NMS
  std::string cache_dir;  // --cache-dir: where the label cache goes (see resolve_cache_dir)
};

// One study row as YOLOv5 writes it: P, R, mAP50, mAP50-95, the three val losses (0 without a
// training loss), then pre-process, inference and NMS milliseconds per image, each "%10.4g".
std::string study_row(const std::vector<double>& values);
// The image sizes a study runs: 256, 384, ..., 1536.
std::vector<int> study_sizes();

// val under torchrun: the ranks that share the validation (null: this process alone) and this
// rank's place on its machine (its GPU: the local_rank-th of --device's, or cuda:local_rank).
struct ValRanks {
  const RankExchange* exchange = nullptr;
  int local_rank = 0, local_world_size = 1;
};

// Under torchrun (`ranks`) every rank validates its contiguous share of the batches; rank 0
// prints and writes what one process does, with the same --batch-size per rank.
int val_main(int argc, char** argv, const ValRanks& ranks = {});

}  // namespace yolo

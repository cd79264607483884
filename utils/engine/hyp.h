#pragma once
// Hyperparameters (hyp/*.yaml): YOLOv5 v7.0's keys as typed members, read and checked once, and
// `dfl`, the anchor-free models' distribution focal loss gain.
#include <map>
#include <string>
#include <vector>

#include "utils/eval/loss.h"

namespace YAML {
class Node;
}

namespace yolo {

struct Hyp {
  double lr0 = 0;              // initial learning rate
  double lrf = 0;              // final OneCycleLR learning rate (lr0 * lrf)
  double momentum = 0;         // SGD momentum / Adam beta1
  double weight_decay = 0;     // optimizer weight decay
  double warmup_epochs = 0;    // warmup epochs (fractions ok)
  double warmup_momentum = 0;  // warmup initial momentum
  double warmup_bias_lr = 0;   // warmup initial bias lr
  double box = 0;              // box loss gain
  double cls = 0;              // cls loss gain
  double cls_pw = 0;           // cls BCELoss positive_weight
  double obj = 0;              // obj loss gain (scale with pixels)
  double obj_pw = 0;           // obj BCELoss positive_weight
  double iou_t = 0;            // IoU training threshold
  double anchor_t = 0;         // anchor-multiple threshold
  double anchors = 0;          // anchors per output layer; optional, see has_anchors
  double fl_gamma = 0;         // focal loss gamma
  double hsv_h = 0;            // image HSV-Hue augmentation (fraction)
  double hsv_s = 0;            // image HSV-Saturation augmentation (fraction)
  double hsv_v = 0;            // image HSV-Value augmentation (fraction)
  double degrees = 0;          // image rotation (+/- deg)
  double translate = 0;        // image translation (+/- fraction)
  double scale = 0;            // image scale (+/- gain)
  double shear = 0;            // image shear (+/- deg)
  double perspective = 0;      // image perspective (+/- fraction)
  double flipud = 0;           // image flip up-down (probability)
  double fliplr = 0;           // image flip left-right (probability)
  double mosaic = 0;           // image mosaic (probability)
  double mixup = 0;            // image mixup (probability)
  double copy_paste = 0;       // segment copy-paste (probability)
  double dfl = 1.5;            // distribution focal loss gain (anchor-free models); optional
  bool has_dfl = false;        // whether the file gave `dfl` (written back only then)
  // YOLOv5's files may carry `anchors` (its evolution writes it); written back only when given.
  bool has_anchors = false;

  // By YOLOv5 key name, for code that picks hyperparameters by name (evolution). at() throws
  // std::logic_error for a name that is no hyperparameter, std::runtime_error for anchors when
  // not given; get() gives `fallback` for both; set() throws std::logic_error for an unknown name.
  double at(const std::string& key) const;
  double get(const std::string& key, double fallback) const;
  void set(const std::string& key, double v);
};

// The keys every hyp file must define (YOLOv5 v7.0 hyp.scratch-*.yaml), in its order.
const std::vector<std::string>& required_hyp_keys();

// Loads and checks a hyp YAML: known keys only, numbers only, every required key present;
// errors name the file, line and key.
Hyp load_hyp(const std::string& path);

// train's --hyp-set: `key=value` words over a hyp file's values. check_hyp_set says what is wrong
// with the words ("" when nothing: known names, numbers); apply_hyp_set returns `hyp` with them
// set, checked as a hyp file's values are. Errors name the word as the user typed it:
// `flag` and the word ("--hyp-set lr0=-1"), or the word alone when `flag` is "" (the yolo
// program's lr0=-1).
std::string check_hyp_set(const std::vector<std::string>& items);
Hyp apply_hyp_set(const Hyp& hyp, const std::vector<std::string>& items,
                  const std::string& flag = "--hyp-set");

// Each key `items` sets, with the words naming it as apply_hyp_set's errors do.
std::map<std::string, std::string> hyp_set_words(const std::vector<std::string>& items,
                                                 const std::string& flag = "--hyp-set");

// The hyp file's `anchors` as a count per output layer (rounded, as YOLOv5's Model rounds it):
// 0 when absent or 0 (the model YAML's anchors stay). Throws std::runtime_error naming
// `hyp_path` and the key for a value outside 0..16.
int hyp_anchor_count(const Hyp& hyp, const std::string& hyp_path);
Hyp hyp_from_yaml(const YAML::Node& node, const std::string& context);
// YOLOv5's key order; anchors only when given.
YAML::Node hyp_to_yaml(const Hyp& hyp);

// train.py's scaling of the loss gains: box *= 3/nl, cls *= nc/80 * 3/nl, obj *= (imgsz/640)^2 *
// 3/nl.
LossGains scale_loss_gains(const Hyp& hyp, int nl, int nc, int imgsz, double label_smoothing);

}  // namespace yolo

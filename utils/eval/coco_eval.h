#pragma once
// COCO's detection protocol (pycocotools' COCOeval for boxes) without Python: the same matching
// (score order, crowd regions, area ranges, at most 100 detections per image and class) and the
// same 101-point interpolated precision, so its 12 numbers equal pycocotools' summary. YOLOv5's
// val.py --save-json reports these when the dataset has COCO annotations.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace yolo {

// One box in COCO's xywh pixels (top-left corner, width, height). Ground truth has `id`, `area`
// (COCO's area field, used for the small/medium/large ranges) and `iscrowd`; detections a score.
struct CocoBox {
  std::string image_id;  // coco_image_key() of the image's id
  int64_t category_id = 0;
  double x = 0, y = 0, w = 0, h = 0;
  double score = 0;
  double area = 0;
  bool iscrowd = false;
  int64_t id = 0;
};

struct CocoGroundTruth {
  std::string path;
  std::vector<std::string> image_ids;  // keys, as listed in "images"
  std::vector<int64_t> category_ids;   // as listed in "categories"
  std::vector<CocoBox> annotations;
};

// An image id as a key: integers (and all-digit file stems, as YOLOv5 makes ids of them) in
// decimal without leading zeros, other strings as they are.
std::string coco_image_key(const std::string& stem_or_id);
// The JSON value of an image id: a number for an all-digit stem (YOLOv5's int(stem)), else a
// quoted string.
std::string coco_image_id_json(const std::string& stem);

// Reads instances_*.json (images, annotations, categories; segmentations are skipped). Throws
// std::runtime_error naming the file and what is missing or malformed.
CocoGroundTruth load_coco_ground_truth(const std::string& path);

// Reads a COCO results file (a list of {image_id, category_id, bbox, score}). Throws
// std::runtime_error naming the file and the entry that is malformed.
std::vector<CocoBox> load_coco_results(const std::string& path);

// YOLOv5's coco80_to_coco91_class(): COCO's category id for each of the 80 class indices.
const std::vector<int>& coco80_to_coco91();

// pycocotools' stats: AP @[.5:.95], AP50, AP75, AP small, medium, large, AR @1, @10, @100, AR
// small, medium, large; -1 where no ground truth falls in the range.
struct CocoStats {
  std::array<double, 12> stats{};
  double map() const { return stats[0]; }
  double map50() const { return stats[1]; }
  // The 12 lines pycocotools' summarize() prints.
  std::string summary() const;
};

// Evaluates `detections` against `gt` over `image_ids` (keys; empty: every image in `gt`), as
// COCOeval(gt, dt, "bbox") with params.imgIds set. Detections of other images or categories are
// ignored.
CocoStats coco_evaluate(const CocoGroundTruth& gt, const std::vector<CocoBox>& detections,
                        std::vector<std::string> image_ids = {});

}  // namespace yolo

#pragma once
// Image + box transforms as YOLOv5 v7.0 (utils/augmentations.py, utils/dataloaders.py): the
// load-time resize, letterbox, 4-image mosaic, random_perspective with box_candidates, mixup, HSV
// jitter and flips. Images are 8-bit BGR; randomness comes from the caller's generator so each
// sample is reproducible.
#include <array>
#include <map>
#include <opencv2/core.hpp>
#include <random>
#include <string>

#include "data/labels.h"

namespace YAML {
class Node;
}

namespace yolo {

using Rng = std::mt19937_64;

// Uniform double in [a, b).
double uniform(Rng& rng, double a, double b);

// The augmentation keys of a hyp YAML (defaults: hyp.scratch-low.yaml).
struct AugmentHyp {
  double hsv_h = 0.015, hsv_s = 0.7, hsv_v = 0.4;
  double degrees = 0.0, translate = 0.1, scale = 0.5, shear = 0.0, perspective = 0.0;
  double flipud = 0.0, fliplr = 0.5, mosaic = 1.0, mixup = 0.0, copy_paste = 0.0;

  // Reads the keys present in `node` (others keep their defaults; unrelated keys are ignored).
  // Throws std::runtime_error "context:line: key 'x' ..." on a non-number or an out-of-range value
  // (probabilities and gains must be in 0..1, the rest >= 0).
  static AugmentHyp from_yaml(const YAML::Node& node, const std::string& context);
  // The same from a name -> value map (the trainer's hyperparameters by name).
  static AugmentHyp from_map(const std::map<std::string, double>& values,
                             const std::string& context);
  // Every augmentation off (for tests and validation).
  static AugmentHyp none();
};

// load_image's resize: longest side to imgsz keeping the aspect ratio (sizes rounded up);
// INTER_AREA when shrinking without augmentation, else INTER_LINEAR. Returns `im` itself when
// it already fits exactly.
cv::Mat resize_to_imgsz(const cv::Mat& im, int imgsz, bool augment);

struct LetterboxResult {
  cv::Mat image;
  float ratio_w = 1, ratio_h = 1;  // scale applied to the input
  float pad_w = 0, pad_h = 0;      // padding on the left / top side (may be fractional: dw/2)
};

// Resizes keeping the aspect ratio and pads with grey 114 to `shape` (w x h). auto: pad only to
// a multiple of `stride`; scale_fill: stretch without padding; scaleup=false: never enlarge.
LetterboxResult letterbox(const cv::Mat& im, cv::Size shape, bool auto_pad = true,
                          bool scale_fill = false, bool scaleup = true, int stride = 32);

// YOLOv5's box_candidates: keeps a transformed box when it is over wh_thr px in both sides,
// keeps over area_thr of its (scaled) original area and has aspect ratio under ar_thr.
bool box_candidate(const PixelBox& before, const PixelBox& after, float wh_thr = 2,
                   float ar_thr = 100, float area_thr = 0.1f);

// Random rotation/scale/shear/translation/perspective (hyp degrees, scale, shear, translate,
// perspective). `border` < 0 crops the output by -border on each side (mosaic uses -imgsz/2).
// Boxes are warped by their 4 corners, clipped, and filtered with box_candidate.
cv::Mat random_perspective(const cv::Mat& im, PixelBoxes& boxes, const AugmentHyp& hyp, Rng& rng,
                           int border = 0);

// Places 4 images (already resized to at most s) around a random centre of a 2s x 2s grey canvas
// as YOLOv5's load_mosaic; their normalised labels become pixel boxes on the canvas (clipped).
cv::Mat mosaic4(const std::array<cv::Mat, 4>& images, const std::array<const Labels*, 4>& labels,
                int s, Rng& rng, PixelBoxes& boxes);

// Blends two same-size images with ratio ~ Beta(32, 32) and concatenates their boxes.
cv::Mat mixup(const cv::Mat& a, PixelBoxes& boxes_a, const cv::Mat& b, const PixelBoxes& boxes_b,
              Rng& rng);

// Random hue/saturation/value gains in [1-g, 1+g], in place (no-op when all gains are 0).
void augment_hsv(cv::Mat& im, double hgain, double sgain, double vgain, Rng& rng);

// Flips in place; normalised labels follow.
void flip_lr(cv::Mat& im, Labels& labels);
void flip_ud(cv::Mat& im, Labels& labels);

}  // namespace yolo

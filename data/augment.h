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
#include <vector>

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
  // The same from a name -> value map (the trainer's hyperparameters by name); errors name
  // `context`, or for a key in `given` the word that set it (`--hyp-set mosaic=2`).
  static AugmentHyp from_map(const std::map<std::string, double>& values,
                             const std::string& context,
                             const std::map<std::string, std::string>& given = {});
  // Every augmentation off (for tests and validation).
  static AugmentHyp none();
};

// load_image's resize: longest side to imgsz keeping the aspect ratio (sizes rounded up);
// INTER_AREA when shrinking without augmentation, else INTER_LINEAR. Returns `im` itself when
// it already fits exactly.
cv::Mat resize_to_imgsz(const cv::Mat& im, int imgsz, bool augment);

// The size resize_to_imgsz gives an image of size `sz`.
cv::Size resized_size(cv::Size sz, int imgsz);

struct LetterboxResult {
  cv::Mat image;
  float ratio_w = 1, ratio_h = 1;  // scale applied to the input
  float pad_w = 0, pad_h = 0;      // padding on the left / top side (may be fractional: dw/2)
  cv::Size size;                   // of `image`
  cv::Rect content;                // where the resized input lies in `image`
};

// Resizes keeping the aspect ratio and pads with grey 114 to `shape` (w x h). auto: pad only to
// a multiple of `stride`; scale_fill: stretch without padding; scaleup=false: never enlarge.
LetterboxResult letterbox(const cv::Mat& im, cv::Size shape, bool auto_pad = true,
                          bool scale_fill = false, bool scaleup = true, int stride = 32);
// letterbox's geometry for an input of size `in`, without the pixels (`image` stays empty).
LetterboxResult letterbox_plan(cv::Size in, cv::Size shape, bool auto_pad = true,
                               bool scale_fill = false, bool scaleup = true, int stride = 32);

// YOLOv5's box_candidates: keeps a transformed box when it is over wh_thr px in both sides,
// keeps over area_thr of its (scaled) original area and has aspect ratio under ar_thr.
bool box_candidate(const PixelBox& before, const PixelBox& after, float wh_thr = 2,
                   float ar_thr = 100, float area_thr = 0.1f);

// What the transforms draw, kept so that a sample can be rendered elsewhere (data/device_augment)
// from the same numbers. Each transform below is split into its draws, its box math and its pixels;
// the one-call forms compose them (and can report what they drew).

// Source rectangles copied onto a grey 114 canvas: a mosaic's 4 tiles or a letterbox's one.
struct CanvasLayout {
  // A rectangle of source i and its place on the canvas (the same size; may be empty).
  struct Tile {
    cv::Rect src, dst;
  };
  cv::Size size;
  std::vector<Tile> tiles;  // tile i reads source i
};

// random_perspective's draw. The output pixel p takes the canvas pixel M^-1 p (bilinear).
struct WarpParams {
  cv::Matx33d M = cv::Matx33d::eye();  // canvas -> output pixel coordinates
  cv::Size size;                       // output (w x h)
  double scale = 1;                    // the drawn scale (box_candidate's area test)
  bool perspective = false;            // cv::warpPerspective; else cv::warpAffine of M's top rows
  bool applied = false;                // false: the image passed through (M = I, no border)
};

// augment_hsv's draw: gains on hue, saturation, value.
struct HsvGains {
  double h = 1, s = 1, v = 1;
  bool applied = false;  // false when all hyp gains are 0 (nothing drawn, image unchanged)
};

// One image before mixup, HSV and flips: sources placed on a canvas, then warped.
struct CanvasRecipe {
  std::vector<cv::Mat> sources;  // 8-bit BGR, one per tile (read-only: may alias a cache)
  CanvasLayout layout;
  WarpParams warp;  // warp.size is the image's size even when not applied
};

// Random rotation/scale/shear/translation/perspective (hyp degrees, scale, shear, translate,
// perspective). `border` < 0 crops the output by -border on each side (mosaic uses -imgsz/2).
// Boxes are warped by their 4 corners, clipped, and filtered with box_candidate.
cv::Mat random_perspective(const cv::Mat& im, PixelBoxes& boxes, const AugmentHyp& hyp, Rng& rng,
                           int border = 0);
// Its parts: the draws for an input of size `in`, the boxes, the pixels (`im` itself when the
// warp is not applied).
WarpParams draw_warp(cv::Size in, const AugmentHyp& hyp, Rng& rng, int border = 0);
void warp_boxes(const WarpParams& warp, PixelBoxes& boxes);
cv::Mat render_warp(const cv::Mat& im, const WarpParams& warp);

// Places 4 images (already resized to at most s) around a random centre of a 2s x 2s grey canvas
// as YOLOv5's load_mosaic; their normalised labels become pixel boxes on the canvas (clipped).
cv::Mat mosaic4(const std::array<cv::Mat, 4>& images, const std::array<const Labels*, 4>& labels,
                int s, Rng& rng, PixelBoxes& boxes);
// Its parts: the centre's draws and the tiles for images of these sizes, the boxes.
CanvasLayout place_mosaic(const std::array<cv::Size, 4>& sizes, int s, Rng& rng);
PixelBoxes mosaic_boxes(const CanvasLayout& layout, const std::array<cv::Size, 4>& sizes,
                        const std::array<const Labels*, 4>& labels);

// The canvas: grey 114 with each tile copied in. Returns sources[0] itself when its one tile is
// the whole canvas.
cv::Mat render_layout(const std::vector<cv::Mat>& sources, const CanvasLayout& layout);
// Placement then warp; the result never aliases a source.
cv::Mat render_canvas(const CanvasRecipe& recipe);

// Blends two same-size images with ratio ~ Beta(32, 32) and concatenates their boxes.
cv::Mat mixup(const cv::Mat& a, PixelBoxes& boxes_a, const cv::Mat& b, const PixelBoxes& boxes_b,
              Rng& rng);
double draw_mixup_ratio(Rng& rng);
// a * r + b * (1 - r), rounded (cv::addWeighted).
cv::Mat blend(const cv::Mat& a, const cv::Mat& b, double r);

// Random hue/saturation/value gains in [1-g, 1+g], in place (no-op when all gains are 0).
void augment_hsv(cv::Mat& im, double hgain, double sgain, double vgain, Rng& rng);
// Its parts: the draws; the 1 x 256 table of 3 channels mapping OpenCV's 8-bit H (0..179), S and V;
// the pixels (BGR -> HSV, table, HSV -> BGR).
HsvGains draw_hsv(double hgain, double sgain, double vgain, Rng& rng);
cv::Mat hsv_lut(const HsvGains& gains);
void apply_hsv(cv::Mat& im, const HsvGains& gains);

// Flips in place; normalised labels follow.
void flip_lr(cv::Mat& im, Labels& labels);
void flip_ud(cv::Mat& im, Labels& labels);
void flip_labels_lr(Labels& labels);
void flip_labels_ud(Labels& labels);

}  // namespace yolo

#pragma once
// The training transforms' pixels as batched tensor ops on any device, from the SampleRecipes that
// YoloDataset::get_recipe draws (the CPU then only decodes and computes labels):
//   - placement: each canvas (a mosaic's 4 tiles or a letterbox's 1) on grey 114, by slice copies;
//   - one bilinear warp for the whole batch, a gather with OpenCV's fixed-point arithmetic
//     (coordinates in 1/32 pixel as warpAffine/warpPerspective compute them, 15-bit weights);
//   - mixup as cv::addWeighted rounds it;
//   - HSV jitter through OpenCV's 8-bit BGR<->HSV formulas and the same per-sample tables;
//   - flips, by reading the warp's output coordinates backwards (every later step is per pixel).
// The result equals the OpenCV path's on the CPU (tests/data/test_device_augment.cpp measures it).
// Two OpenCV details are emulated rather than shared: cv::addWeighted's float rounding, and its
// HSV -> BGR vector code, which fuses multiply-adds (a build without them, or the pixels past a
// multiple of 32 in a row, which it converts with scalar code, can differ by 1 grey level; training
// widths are multiples of the stride 32). On the CPU this path is far slower than OpenCV's and its
// temporaries peak near 1 GB for 16 images of 640 x 640: it is meant for a GPU.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace yolo {

// Sizes, copy rectangles and the sections of RecipeBatch::params, kept on the host so that
// render_batch never reads from the device. Canvases are the samples' (index = sample), then the
// mixup partners' in sample order.
struct RecipeLayout {
  struct Tile {
    int64_t canvas = 0;
    int64_t offset = 0;  // first pixel of its rectangle in RecipeBatch::sources
    cv::Rect dst;        // where it goes on the canvas
  };
  int64_t batch = 0, canvases = 0;
  int64_t height = 0, width = 0;                // output: the largest sample (others padded)
  int64_t canvas_height = 0, canvas_width = 0;  // the largest canvas
  std::vector<Tile> tiles;
  int64_t affine = 0, perspective = 0;  // canvases warped each way
  int64_t mixups = 0, hsv = 0;          // samples with mixup, with HSV
  bool padded = false;                  // a sample smaller than the output
  // Offsets into params of: per canvas column and row tables (2 x width, 2 x height), inverse
  // perspective matrices (9), kinds (1: perspective); per mixup (sample, canvas, alpha, beta);
  // HSV sample indices, their tables (3 x 256); per sample its size (w, h); OpenCV's HSV tables.
  int64_t cols = 0, rows = 0, mats = 0, kinds = 0, mix = 0, hsv_index = 0, luts = 0, own = 0,
          tables = 0, size = 0;  // size: of params
};

struct RecipeBatch {
  at::Tensor sources;  // (P, 3) uint8: the BGR pixels of every tile's rectangle, one after another
  at::Tensor params;   // (K,) float64: the per-canvas and per-sample numbers (see RecipeLayout)
  at::Tensor targets;  // (n, 6): image index in batch, class, cx, cy, w, h: as collate()'s
  std::vector<std::string> paths;
  std::vector<ShapeInfo> shapes;
  RecipeLayout layout;
};

// Packs recipes (their paths are moved out) for render_batch: only the tiles' visible rectangles
// are copied. Samples of different sizes are padded bottom/right to the largest and their labels
// re-normalised, as collate() does. `pin_memory`: page-locked sources, params and targets (needs
// CUDA), which render_batch copies to a GPU without waiting.
RecipeBatch collate_recipes(std::vector<SampleRecipe>& recipes, bool pin_memory = false);

// The batch's images on `device`: (B, 3, H, W) float32 RGB in 0..1, what images_to_device gives
// for collate()'s uint8 batch of the same samples rendered by YoloDataset::get. Reads nothing back
// from the device.
at::Tensor render_batch(const RecipeBatch& batch, const c10::Device& device);

}  // namespace yolo

#pragma once
// YOLOv5 v7.0's LoadImagesAndLabels: the checked image list of one split, its labels and sizes,
// optional image caching, rect batch shapes, and one training or validation sample at a time.
#include <functional>
#include <memory>
#include <opencv2/core.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/disk_image_cache.h"
#include "data/image_cache.h"
#include "data/labels.h"
#include "utils/core/rank_exchange.h"

namespace yolo {

class SharedRamCache;

struct DatasetOptions {
  int imgsz = 640;
  int batch_size = 16;   // for rect batch shapes
  bool augment = false;  // training transforms (mosaic, perspective, HSV, flips)
  bool rect = false;     // rectangular batches (sorted by aspect ratio; no mosaic)
  bool single_cls = false;
  int stride = 32;
  double pad = 0.0;  // rect padding in strides (YOLOv5: 0.0 train, 0.5 val)
  // Without rect: the size every image is letterboxed into after its resize to imgsz (a
  // fixed-input model's); empty means imgsz x imgsz.
  cv::Size letterbox_shape;
  std::string cache;  // "", "ram" or "disk"
  // Where the label cache and --cache disk's files go instead of beside the data (a read-only
  // dataset), resolved by resolve_cache_dir; "" beside the data.
  std::string cache_dir;
  // Without "ram": the bytes of decoded, resized images kept in memory (see ImageCache); -1 the
  // default (default_image_cache_bytes()), 0 none.
  int64_t image_cache_bytes = -1;
  AugmentHyp hyp;
  int nc = 80;  // class ids must be below this (not checked with single_cls)
  // Ultralytics' close_mosaic: samples of this epoch and later are letterboxed, never mosaics
  // (nor the mixup drawn with one); -1: mosaic throughout.
  int64_t close_mosaic_epoch = -1;
  int threads = 0;  // for checking labels and caching images; 0 = hardware threads
  // The ranks that load this split together (see load_labels); null: this process alone.
  const RankExchange* ranks = nullptr;
};

// How a sample's pixels relate to the original image: original size and the scale and padding
// applied (box_orig = (box - pad) / ratio). `valid` is false for mosaic samples.
struct ShapeInfo {
  int h0 = 0, w0 = 0;
  float ratio_h = 1, ratio_w = 1;
  float pad_w = 0, pad_h = 0;
  bool valid = false;
};

struct Sample {
  cv::Mat image;  // 8-bit BGR, owned (never aliases a cached image)
  Labels labels;  // normalised to `image`
  std::string path;
  ShapeInfo shape;
};

// A sample as get() draws it, without its pixels: the source images and every transform's
// parameters (what get() renders with OpenCV; data/device_augment renders it as tensor ops).
struct SampleRecipe {
  CanvasRecipe canvas;
  std::optional<CanvasRecipe> mixup;  // blended in: canvas * mixup_ratio + mixup * (1 - ratio)
  double mixup_ratio = 1;
  HsvGains hsv;
  bool flip_ud = false, flip_lr = false;  // applied in this order, after HSV
  Labels labels;                          // final: equal to get()'s
  std::string path;
  ShapeInfo shape;
};

class YoloDataset {
 public:
  // Lists images from `sources` (see list_image_files), loads checked labels through the label
  // cache, and caches images when opt.cache is set. Throws std::runtime_error naming the source
  // or file on errors, UsageError for a bad opt.cache value.
  YoloDataset(const std::vector<std::string>& sources, DatasetOptions opt);

  size_t size() const { return files_.size(); }
  const DatasetOptions& options() const { return opt_; }
  const std::vector<std::string>& image_files() const { return files_; }
  const std::vector<Labels>& labels() const { return labels_; }
  // Original image sizes (width x height).
  const std::vector<cv::Size>& image_sizes() const { return sizes_; }
  // Rect batch shapes (w x h) by batch number; empty unless opt.rect.
  const std::vector<cv::Size>& batch_shapes() const { return batch_shapes_; }

  // The image resized so its longest side is imgsz (from the RAM cache, the bounded cache, the
  // disk cache or the file). May alias a cache: do not modify it in place. Throws naming the
  // file.
  cv::Mat load_image(size_t i) const;

  // The bounded cache's figures (all zero with --cache ram or image_cache_bytes 0).
  ImageCache::Stats image_cache_stats() const;
  // Bytes held by --cache ram (0 without it).
  int64_t ram_cache_bytes() const { return ram_bytes_; }
  // --cache disk's files (all zero without it).
  DiskImageCache::Stats disk_cache_stats() const {
    return disk_ ? disk_->stats() : DiskImageCache::Stats{};
  }

  // Sample `index` (remapped through set_indices) of training epoch `epoch`, transformed with
  // randomness from `rng`. Exceptions carry the image path.
  Sample get(size_t index, Rng& rng, int64_t epoch = 0) const;

  // Index remapping used by image-weighted sampling (identity by default): sample i is image
  // indices[i]. Call only while no loader epoch runs (after the epoch's last batch, or after
  // DataLoader::stop()). Throws std::invalid_argument on a wrong size or index.
  void set_indices(std::vector<size_t> indices);
  const std::vector<size_t>& indices() const { return indices_; }

  // get() without the pixels: the same draws from `rng` in the same order, the same labels, and
  // the source images loaded (through load_image). Exceptions carry the image path.
  SampleRecipe get_recipe(size_t index, Rng& rng, int64_t epoch = 0) const;

 private:
  void make_rect_shapes();
  void cache_images();
  void cache_images_shared();
  int64_t ram_cache_required() const;
  template <typename Fn>
  auto with_path(size_t index, Fn fn) const;
  Sample get_unchecked(size_t index, Rng& rng, int64_t epoch) const;
  SampleRecipe recipe_unchecked(size_t index, Rng& rng, int64_t epoch) const;
  CanvasRecipe mosaic_recipe(size_t first, Rng& rng, PixelBoxes& boxes) const;
  CanvasRecipe letterbox_recipe(size_t index, Rng& rng, PixelBoxes& boxes, ShapeInfo& shape) const;

  DatasetOptions opt_;
  std::vector<std::string> files_;
  std::vector<Labels> labels_;
  std::vector<cv::Size> sizes_;  // width x height of the originals
  std::vector<cv::Size> batch_shapes_;
  std::vector<size_t> indices_;
  std::vector<cv::Mat> ram_;  // resized images with --cache ram (over shared_ram_ with ranks)
  std::shared_ptr<SharedRamCache> shared_ram_;
  int64_t ram_bytes_ = 0;
  std::unique_ptr<DiskImageCache> disk_;     // with --cache disk
  std::unique_ptr<ImageCache> image_cache_;  // without --cache ram
};

// YOLOv5's labels_to_class_weights: inverse class frequency, normalised to sum 1 (classes with no
// labels count as 1).
std::vector<double> class_weights(const std::vector<Labels>& labels, int nc);

// YOLOv5's labels_to_image_weights: per image, sum over its labels of the class weight.
std::vector<double> image_weights(const std::vector<Labels>& labels, int nc,
                                  const std::vector<double>& class_weights);

// n indices drawn with replacement with probability proportional to `weights`
// (random.choices(range(n), weights, k=n)).
std::vector<size_t> weighted_indices(const std::vector<double>& weights, size_t n, Rng& rng);

}  // namespace yolo

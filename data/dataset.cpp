#include "data/dataset.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <numeric>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <thread>

#include "data/disk_image_cache.h"
#include "data/file_lists.h"
#include "data/image_io.h"
#include "data/label_cache.h"
#include "data/parallel_for.h"
#include "data/shared_ram_cache.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"

namespace fs = std::filesystem;

namespace yolo {
namespace {

std::string format_gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (int64_t{1} << 30));
  return buf;
}

}  // namespace

YoloDataset::YoloDataset(const std::vector<std::string>& sources, DatasetOptions opt)
    : opt_(std::move(opt)) {
  if (opt_.cache != "" && opt_.cache != "ram" && opt_.cache != "disk") {
    throw UsageError("--cache: '" + opt_.cache + "' is not valid; use ram or disk");
  }
  if (opt_.imgsz <= 0 || opt_.batch_size <= 0 || opt_.stride <= 0) {
    throw UsageError("dataset: imgsz, batch size and stride must be positive");
  }
  const auto files = list_image_files(sources);
  const std::string cache_path = cache_file_in(label_cache_path(sources, files), opt_.cache_dir);
  // single_cls folds every class to 0, so ids are not checked against nc (which is then 1).
  const int check_nc = opt_.single_cls ? std::numeric_limits<int>::max() : opt_.nc;
  LabelScan scan = load_labels(files, cache_path, check_nc, opt_.ranks, opt_.threads);
  if (opt_.augment && scan.found == 0) {
    throw std::runtime_error(cache_path +
                             ": no labels found, cannot train; put YOLO .txt labels "
                             "in the labels/ folder matching each images/ folder");
  }
  for (auto& r : scan.records) {
    if (opt_.single_cls) {
      for (auto& l : r.labels) l.cls = 0;
    }
    files_.push_back(std::move(r.image));
    labels_.push_back(std::move(r.labels));
    sizes_.emplace_back(r.width, r.height);
  }
  if (opt_.rect) make_rect_shapes();
  indices_.resize(files_.size());
  std::iota(indices_.begin(), indices_.end(), size_t{0});
  if (!opt_.cache.empty()) cache_images();
  if (ram_.empty() && opt_.image_cache_bytes != 0) {
    const int64_t budget =
        opt_.image_cache_bytes < 0 ? default_image_cache_bytes() : opt_.image_cache_bytes;
    image_cache_ = std::make_unique<ImageCache>(files_.size(), budget);
  }
}

void YoloDataset::make_rect_shapes() {
  const size_t n = files_.size(), bs = static_cast<size_t>(opt_.batch_size);
  std::vector<double> ar(n);
  for (size_t i = 0; i < n; ++i) ar[i] = double(sizes_[i].height) / sizes_[i].width;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ar[a] < ar[b]; });
  std::vector<std::string> files;
  std::vector<Labels> labels;
  std::vector<cv::Size> sizes;
  std::vector<double> sorted_ar;
  for (size_t i : order) {
    files.push_back(std::move(files_[i]));
    labels.push_back(std::move(labels_[i]));
    sizes.push_back(sizes_[i]);
    sorted_ar.push_back(ar[i]);
  }
  files_ = std::move(files), labels_ = std::move(labels), sizes_ = std::move(sizes);
  const size_t nb = (n + bs - 1) / bs;
  batch_shapes_.clear();
  for (size_t b = 0; b < nb; ++b) {
    const double mini = sorted_ar[b * bs], maxi = sorted_ar[std::min(n, (b + 1) * bs) - 1];
    double sh = 1, sw = 1;  // (h, w) relative to imgsz
    if (maxi < 1) {
      sh = maxi;
    } else if (mini > 1) {
      sw = 1 / mini;
    }
    auto side = [&](double f) {
      return static_cast<int>(std::ceil(f * opt_.imgsz / opt_.stride + opt_.pad)) * opt_.stride;
    };
    batch_shapes_.emplace_back(side(sw), side(sh));
  }
}

// Bytes of every image resized as load_image resizes it (exact: the sizes come from the label
// scan), so --cache ram is refused before it fills the memory rather than after.
int64_t YoloDataset::ram_cache_required() const {
  int64_t bytes = 0;
  for (const cv::Size& sz : sizes_) {
    const cv::Size r = resized_size(sz, opt_.imgsz);
    bytes += int64_t{r.width} * r.height * 3;
  }
  return bytes;
}

// --cache ram with several ranks: one copy per machine in shared memory, filled by its ranks.
void YoloDataset::cache_images_shared() {
  std::vector<cv::Size> slots;
  for (const cv::Size& sz : sizes_) slots.push_back(resized_size(sz, opt_.imgsz));
  shared_ram_ = SharedRamCache::create(
      slots,
      [this](size_t i) { return resize_to_imgsz(read_image(files_[i]), opt_.imgsz, opt_.augment); },
      *opt_.ranks, opt_.threads);
  if (!shared_ram_) {
    opt_.cache.clear();
    return;
  }
  ram_.resize(files_.size());
  for (size_t i = 0; i < files_.size(); ++i) ram_[i] = shared_ram_->image(i);
  ram_bytes_ = shared_ram_->bytes();
}

void YoloDataset::cache_images() {
  if (opt_.cache == "ram" && opt_.ranks && opt_.ranks->size() > 1) {
    cache_images_shared();
  } else if (opt_.cache == "ram") {
    // As YOLOv5's check_cache_ram: a tenth of headroom over what the images take.
    const int64_t required = ram_cache_required(), available = available_memory_bytes();
    if (available > 0 && static_cast<double>(required) * 1.1 > static_cast<double>(available)) {
      log_warn("--cache ram: " + format_gib(required) + " GB RAM required, " +
               format_gib(available) + " GB available, not caching images (decoded images " +
               "are kept in a bounded cache instead)");
      opt_.cache.clear();
      return;
    }
    std::vector<cv::Mat> ims(files_.size());
    std::atomic<size_t> bytes{0};
    parallel_for(files_.size(), opt_.threads, [&](size_t i) {
      ims[i] = resize_to_imgsz(read_image(files_[i]), opt_.imgsz, opt_.augment);
      bytes += ims[i].total() * ims[i].elemSize();
    });
    ram_ = std::move(ims);
    ram_bytes_ = static_cast<int64_t>(bytes.load());
    log_info("Cached " + std::to_string(files_.size()) + " images in RAM (" +
             std::to_string(bytes / (1 << 20)) + " MiB)");
  } else if (opt_.cache == "disk") {
    try {
      disk_ = std::make_unique<DiskImageCache>(files_, sizes_, opt_.imgsz, opt_.augment,
                                               opt_.cache_dir, opt_.ranks, opt_.threads);
    } catch (const std::exception& e) {
      log_warn("--cache disk: " + std::string(e.what()) + "; images are decoded from the files");
      opt_.cache.clear();
      return;
    }
    const DiskImageCache::Stats& st = disk_->stats();
    const auto mb = [](int64_t b) { return format_number("%.1f", static_cast<double>(b) / 1e6); };
    std::string line = "Disk image cache: " + std::to_string(st.stored) + " images resized to " +
                       std::to_string(opt_.imgsz) + " as PNG " +
                       (opt_.cache_dir.empty() ? "beside them" : "in " + opt_.cache_dir) + " (" +
                       mb(st.bytes) + " MB, " + std::to_string(st.written) + " written now)";
    if (st.direct) {
      line += ", " + std::to_string(st.direct) + " read from their own files (not larger than " +
              std::to_string(opt_.imgsz) + ")";
    }
    log_info(line + "; full-size .npy files would take " + mb(st.npy_bytes) + " MB");
  }
}

cv::Mat YoloDataset::load_image(size_t i) const {
  if (!ram_.empty() && !ram_[i].empty()) return ram_[i];
  if (image_cache_) {
    cv::Mat cached = image_cache_->find(i);
    if (!cached.empty()) return cached;
  }
  cv::Mat resized = disk_ ? disk_->load(i) : cv::Mat();
  if (resized.empty()) resized = resize_to_imgsz(read_image(files_[i]), opt_.imgsz, opt_.augment);
  if (image_cache_) image_cache_->offer(i, resized);
  return resized;
}

ImageCache::Stats YoloDataset::image_cache_stats() const {
  return image_cache_ ? image_cache_->stats() : ImageCache::Stats{};
}

// fn(image index) for sample `index`, its exceptions carrying the image path.
template <typename Fn>
auto YoloDataset::with_path(size_t index, Fn fn) const {
  if (index >= indices_.size()) {
    throw std::out_of_range("dataset index " + std::to_string(index) + " >= size " +
                            std::to_string(indices_.size()));
  }
  try {
    return fn(indices_[index]);
  } catch (const std::exception& e) {
    const std::string& path = files_[indices_[index]];
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;
    throw std::runtime_error(path + ": " + what);
  }
}

Sample YoloDataset::get(size_t index, Rng& rng, int64_t epoch) const {
  return with_path(index, [&](size_t i) { return get_unchecked(i, rng, epoch); });
}

SampleRecipe YoloDataset::get_recipe(size_t index, Rng& rng, int64_t epoch) const {
  return with_path(index, [&](size_t i) { return recipe_unchecked(i, rng, epoch); });
}

// The OpenCV rendering of a recipe: what get() returns.
Sample YoloDataset::get_unchecked(size_t idx, Rng& rng, int64_t epoch) const {
  SampleRecipe r = recipe_unchecked(idx, rng, epoch);
  Sample out;
  cv::Mat img = render_canvas(r.canvas);
  if (r.mixup) img = blend(img, render_canvas(*r.mixup), r.mixup_ratio);
  apply_hsv(img, r.hsv);
  if (r.flip_ud) cv::flip(img, img, 0);
  if (r.flip_lr) cv::flip(img, img, 1);
  out.image = std::move(img);
  out.labels = std::move(r.labels);
  out.path = std::move(r.path);
  out.shape = r.shape;
  return out;
}

// Every draw of a sample, in YOLOv5's order: mosaic or not, the mosaic's images, centre and warp,
// mixup (its own mosaic and ratio), then HSV gains and flips.
SampleRecipe YoloDataset::recipe_unchecked(size_t idx, Rng& rng, int64_t epoch) const {
  const AugmentHyp& hyp = opt_.hyp;
  SampleRecipe out;
  out.path = files_[idx];
  PixelBoxes boxes;
  const bool closed = opt_.close_mosaic_epoch >= 0 && epoch >= opt_.close_mosaic_epoch;
  const bool mosaic = opt_.augment && !opt_.rect && uniform(rng, 0, 1) < hyp.mosaic && !closed;
  if (mosaic) {
    out.canvas = mosaic_recipe(idx, rng, boxes);
    if (uniform(rng, 0, 1) < hyp.mixup) {
      PixelBoxes other_boxes;
      out.mixup = mosaic_recipe(static_cast<size_t>(uniform(rng, 0, double(files_.size()))), rng,
                                other_boxes);
      out.mixup_ratio = draw_mixup_ratio(rng);
      boxes.insert(boxes.end(), other_boxes.begin(), other_boxes.end());
    }
  } else {
    out.canvas = letterbox_recipe(idx, rng, boxes, out.shape);
  }
  const cv::Size size = out.canvas.warp.size;
  out.labels = to_labels(boxes, float(size.width), float(size.height));
  if (opt_.augment) {
    out.hsv = draw_hsv(hyp.hsv_h, hyp.hsv_s, hyp.hsv_v, rng);
    out.flip_ud = uniform(rng, 0, 1) < hyp.flipud;
    if (out.flip_ud) flip_labels_ud(out.labels);
    out.flip_lr = uniform(rng, 0, 1) < hyp.fliplr;
    if (out.flip_lr) flip_labels_lr(out.labels);
  }
  return out;
}

// YOLOv5's load_mosaic: image `first` and 3 random others around a random centre, then warped
// (copy_paste needs segment polygons; box-only labels leave it a no-op as in YOLOv5).
CanvasRecipe YoloDataset::mosaic_recipe(size_t first, Rng& rng, PixelBoxes& boxes) const {
  std::array<size_t, 4> ids = {first, 0, 0, 0};
  for (int k = 1; k < 4; ++k) {
    ids[k] = indices_[static_cast<size_t>(uniform(rng, 0, double(indices_.size())))];
  }
  for (int k = 3; k > 0; --k) {  // Fisher-Yates, as random.shuffle
    std::swap(ids[k], ids[static_cast<size_t>(uniform(rng, 0, k + 1))]);
  }
  CanvasRecipe c;
  std::array<cv::Size, 4> sizes;
  std::array<const Labels*, 4> lbs;
  for (int k = 0; k < 4; ++k) {
    c.sources.push_back(load_image(ids[k]));
    sizes[k] = c.sources[k].size();
    lbs[k] = &labels_[ids[k]];
  }
  c.layout = place_mosaic(sizes, opt_.imgsz, rng);
  boxes = mosaic_boxes(c.layout, sizes, lbs);
  c.warp = draw_warp(c.layout.size, opt_.hyp, rng, -opt_.imgsz / 2);
  warp_boxes(c.warp, boxes);
  return c;
}

// The image letterboxed to its rect batch shape, the fixed letterbox shape or imgsz square; warped
// when augmenting.
CanvasRecipe YoloDataset::letterbox_recipe(size_t idx, Rng& rng, PixelBoxes& boxes,
                                           ShapeInfo& shape) const {
  const cv::Mat im = load_image(idx);
  const cv::Size target = opt_.rect                      ? batch_shapes_[idx / opt_.batch_size]
                          : opt_.letterbox_shape.empty() ? cv::Size(opt_.imgsz, opt_.imgsz)
                                                         : opt_.letterbox_shape;
  const LetterboxResult lb =
      letterbox_plan(im.size(), target, false, false, opt_.augment, opt_.stride);
  const cv::Size orig = sizes_[idx];
  shape = {orig.height,
           orig.width,
           float(im.rows) / orig.height * lb.ratio_h,
           float(im.cols) / orig.width * lb.ratio_w,
           lb.pad_w,
           lb.pad_h,
           true};
  boxes =
      to_pixel_boxes(labels_[idx], lb.ratio_w * im.cols, lb.ratio_h * im.rows, lb.pad_w, lb.pad_h);
  CanvasRecipe c;
  c.sources.push_back(im);
  if (im.size() != lb.content.size()) {  // rare (load_image scaled to imgsz), as letterbox()
    cv::Mat resized;
    cv::resize(im, resized, lb.content.size(), 0, 0, cv::INTER_LINEAR);
    c.sources[0] = resized;
  }
  c.layout.size = lb.size;
  c.layout.tiles.push_back({cv::Rect(cv::Point(), lb.content.size()), lb.content});
  if (opt_.augment) {
    c.warp = draw_warp(lb.size, opt_.hyp, rng, 0);
    warp_boxes(c.warp, boxes);
  } else {
    c.warp.size = lb.size;
  }
  return c;
}

void YoloDataset::set_indices(std::vector<size_t> indices) {
  if (indices.size() != files_.size()) {
    throw std::invalid_argument("set_indices: expected " + std::to_string(files_.size()) +
                                " indices, got " + std::to_string(indices.size()));
  }
  for (size_t i : indices) {
    if (i >= files_.size()) throw std::out_of_range("set_indices: index out of range");
  }
  indices_ = std::move(indices);
}

std::vector<double> class_weights(const std::vector<Labels>& labels, int nc) {
  std::vector<double> w(static_cast<size_t>(nc), 0.0);
  for (const auto& ls : labels) {
    for (const auto& l : ls) {
      const int c = static_cast<int>(l.cls);
      if (c >= 0 && c < nc) w[c] += 1;
    }
  }
  double sum = 0;
  for (auto& x : w) {
    x = 1.0 / (x == 0 ? 1.0 : x);
    sum += x;
  }
  for (auto& x : w) x /= sum;
  return w;
}

std::vector<double> image_weights(const std::vector<Labels>& labels, int nc,
                                  const std::vector<double>& cw) {
  std::vector<double> out;
  out.reserve(labels.size());
  for (const auto& ls : labels) {
    double s = 0;
    for (const auto& l : ls) {
      const int c = static_cast<int>(l.cls);
      if (c >= 0 && c < nc && c < static_cast<int>(cw.size())) s += cw[c];
    }
    out.push_back(s);
  }
  return out;
}

std::vector<size_t> weighted_indices(const std::vector<double>& weights, size_t n, Rng& rng) {
  std::vector<double> cum(weights.size());
  std::partial_sum(weights.begin(), weights.end(), cum.begin());
  const double total = cum.empty() ? 0 : cum.back();
  std::vector<size_t> out(n);
  for (auto& o : out) {
    if (total <= 0) {  // all weights zero: uniform, rather than failing the epoch
      o = static_cast<size_t>(uniform(rng, 0, double(weights.size())));
      continue;
    }
    const double x = uniform(rng, 0, total);
    o = std::min<size_t>(std::upper_bound(cum.begin(), cum.end(), x) - cum.begin(),
                         weights.size() - 1);
  }
  return out;
}

}  // namespace yolo

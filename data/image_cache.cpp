#include "data/image_cache.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace yolo {

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    int64_t kib = 0;
    in >> kib;
    if (key == "MemAvailable:") return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

int64_t default_image_cache_bytes(int processes_on_host) {
  const int64_t cap = int64_t{4} << 30;
  return std::min(cap, available_memory_bytes() / 10 / std::max(1, processes_on_host));
}

ImageCache::ImageCache(size_t slots, int64_t budget_bytes)
    : images_(slots), budget_(std::max<int64_t>(0, budget_bytes)) {}

cv::Mat ImageCache::find(size_t i) const {
  cv::Mat im;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (i < images_.size()) im = images_[i];  // shares the pixels (a reference count)
  }
  ++(im.empty() ? misses_ : hits_);
  return im;
}

void ImageCache::offer(size_t i, const cv::Mat& image) {
  const auto bytes = static_cast<int64_t>(image.total() * image.elemSize());
  std::lock_guard<std::mutex> lock(m_);
  if (i >= images_.size() || !images_[i].empty() || bytes_ + bytes > budget_) return;
  // Own the pixels: a view would keep its whole parent buffer alive.
  images_[i] = image.isSubmatrix() ? image.clone() : image;
  bytes_ += bytes;
  ++count_;
}

ImageCache::Stats ImageCache::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  return {count_, bytes_, budget_, hits_.load(), misses_.load()};
}

}  // namespace yolo

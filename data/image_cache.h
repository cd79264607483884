#pragma once
// Decoded, resized images kept in memory so that a mosaic does not decode a file again within an
// epoch: each mosaic reads its own image and three random others, so without a cache every image
// is decoded about four times per epoch. The cache keeps the first images offered until its byte
// budget is spent and never evicts: under the uniform random access of mosaics an LRU would hit
// no more often, and a fill-once cache needs no bookkeeping on hits. Thread-safe.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <opencv2/core.hpp>
#include <vector>

namespace yolo {

// The bytes the host can still give to this process's caches: MemAvailable of /proc/meminfo
// (0 when unknown).
int64_t available_memory_bytes();

// The default budget of a dataset's bounded cache: a tenth of the available memory shared by the
// processes of this host, at most 4 GiB.
int64_t default_image_cache_bytes(int processes_on_host = 1);

class ImageCache {
 public:
  ImageCache(size_t slots, int64_t budget_bytes);

  // The cached image `i`, or an empty Mat (counted as a miss).
  cv::Mat find(size_t i) const;
  // Keeps `image` as image `i` while the budget allows; callers must not modify it afterwards.
  void offer(size_t i, const cv::Mat& image);

  struct Stats {
    size_t images = 0;
    int64_t bytes = 0, budget = 0;
    uint64_t hits = 0, misses = 0;
  };
  Stats stats() const;

 private:
  mutable std::mutex m_;
  std::vector<cv::Mat> images_;
  int64_t bytes_ = 0, budget_ = 0;
  size_t count_ = 0;
  mutable std::atomic<uint64_t> hits_{0}, misses_{0};
};

}  // namespace yolo

#pragma once
// --cache ram shared by the ranks of one machine: one file in shared memory (/dev/shm) mapped by
// every local rank, holding each image resized to imgsz, so a machine keeps one copy however many
// ranks train on it (page cache counts once in PSS). The local ranks fill it together, each its
// share of the images. The file is unlinked as soon as every local rank has mapped it: nothing is
// left in /dev/shm when the job ends, is killed or crashes; the memory goes with the last mapping.
#include <cstdint>
#include <functional>
#include <memory>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "utils/core/rank_exchange.h"

namespace yolo {

class SharedRamCache {
 public:
  // The image i as `load(i)` makes it (8-bit, 3 channels, at most `sizes[i]`).
  using Loader = std::function<cv::Mat(size_t)>;

  // Collective over `ranks`. Returns null on every rank, after a warning saying why and what to do,
  // when any machine cannot hold it: its shared-memory folder (`shm_dir`) or its memory has less
  // free space than the images need (Docker's default /dev/shm is 64 MB).
  static std::unique_ptr<SharedRamCache> create(const std::vector<cv::Size>& sizes,
                                                const Loader& load, const RankExchange& ranks,
                                                int threads,
                                                const std::string& shm_dir = "/dev/shm");
  ~SharedRamCache();
  SharedRamCache(const SharedRamCache&) = delete;
  SharedRamCache& operator=(const SharedRamCache&) = delete;

  // Image i over the mapping (no copy; read-only by contract), or empty when it did not fit its
  // slot (then the caller decodes it).
  cv::Mat image(size_t i) const;
  int64_t bytes() const { return static_cast<int64_t>(size_); }

 private:
  SharedRamCache() = default;
  std::vector<size_t> offsets_;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t table_ = 0;  // where the images' heights and widths start
};

}  // namespace yolo

#pragma once
// --cache disk: every image that training reads smaller than it is (its longer side above imgsz)
// is kept resized to imgsz and losslessly compressed (PNG) in a file beside it, or in the cache
// folder, so a large image is read back small and the cache takes a small part of what YOLOv5's
// and Ultralytics' .npy files take (each image decoded at full size). The pixels are those
// resizing the original gives. An image that resizing does not make smaller is read from its own
// file: a lossless copy would be larger and no faster to decode (a raw one would be faster, and
// many times larger).
#include <cstdint>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "utils/core/rank_exchange.h"

namespace yolo {

class DiskImageCache {
 public:
  struct Stats {
    size_t stored = 0;      // images with a cache file
    size_t written = 0;     // of those, written by this run (on this rank)
    size_t direct = 0;      // images read from their own files
    int64_t bytes = 0;      // the cache files' bytes (rank 0's count on multi-rank runs)
    int64_t npy_bytes = 0;  // what full-size .npy files of every image would take
  };

  // Writes the missing or outdated cache files of `files` (original sizes `sizes`, from the label
  // scan). With `ranks`, the ranks of each machine write a share each and agree before returning
  // (null: this process writes them all). Throws naming the folder or file that cannot be
  // written; then the caller reads the originals.
  DiskImageCache(std::vector<std::string> files, std::vector<cv::Size> sizes, int imgsz,
                 bool augment, std::string cache_dir, const RankExchange* ranks, int threads);

  // Image i resized to imgsz from its cache file, or empty when it has none or the file is not
  // what was written (truncated, replaced, older than the image): then the caller reads the
  // original, and the first such file is named in a warning.
  cv::Mat load(size_t i) const;

  const Stats& stats() const { return stats_; }

  // The cache file of `image_path` for this imgsz and interpolation (training resizes with linear
  // interpolation, validation with area): "<image file name>.<imgsz>-linear.cache".
  static std::string path_for(const std::string& image_path, int imgsz, bool augment,
                              const std::string& cache_dir);

 private:
  std::vector<std::string> files_, paths_;  // paths_[i] empty: read from the file
  std::vector<cv::Size> resized_;
  Stats stats_;
};

}  // namespace yolo

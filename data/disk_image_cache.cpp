#include "data/disk_image_cache.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/imgcodecs.hpp>
#include <stdexcept>

#include "data/augment.h"
#include "data/file_lists.h"
#include "data/image_io.h"
#include "data/label_cache.h"
#include "data/parallel_for.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/log.h"

namespace yolo {
namespace fs = std::filesystem;
namespace {

// zlib's fastest level: a third larger than its best on photos, written about four times faster,
// read back as fast.
constexpr int kPngLevel = 1;

// A full-size .npy of a w x h BGR image: 128 header bytes and the pixels.
int64_t npy_bytes(cv::Size sz) { return 128 + int64_t{sz.width} * sz.height * 3; }

// Whether `cache` was written after `image` changed last (false when either is missing).
bool up_to_date(const std::string& cache, const std::string& image) {
  std::error_code ec1, ec2;
  const auto c = fs::last_write_time(cache, ec1), i = fs::last_write_time(image, ec2);
  return !ec1 && !ec2 && c >= i;
}

}  // namespace

std::string DiskImageCache::path_for(const std::string& image_path, int imgsz, bool augment,
                                     const std::string& cache_dir) {
  return cache_file_in(
      image_path + "." + std::to_string(imgsz) + (augment ? "-linear" : "-area") + ".cache",
      cache_dir);
}

DiskImageCache::DiskImageCache(std::vector<std::string> files, std::vector<cv::Size> sizes,
                               int imgsz, bool augment, std::string cache_dir,
                               const RankExchange* ranks, int threads)
    : files_(std::move(files)) {
  const size_t n = files_.size();
  paths_.resize(n);
  resized_.resize(n);
  std::vector<size_t> stored;
  for (size_t i = 0; i < n; ++i) {
    stats_.npy_bytes += npy_bytes(sizes[i]);
    resized_[i] = resized_size(sizes[i], imgsz);
    if (std::max(sizes[i].width, sizes[i].height) <= imgsz) continue;
    paths_[i] = path_for(files_[i], imgsz, augment, cache_dir);
    stored.push_back(i);
  }
  stats_.stored = stored.size();
  stats_.direct = n - stored.size();

  // This rank's share of this machine's files (a shared folder gets each file from every machine,
  // written whole under its final name).
  const RankShare share = ranks
                              ? rank_share(stored.size(), ranks->local_rank(), ranks->local_size())
                              : RankShare{0, stored.size()};
  std::atomic<size_t> written{0};
  std::string problem;
  try {
    parallel_for(share.last - share.first, threads, [&](size_t k) {
      const size_t i = stored[share.first + k];
      if (up_to_date(paths_[i], files_[i])) return;
      const std::string dir = fs::path(paths_[i]).parent_path().string();
      if (!folder_writable(dir)) {
        throw std::runtime_error(dir + " is not writable (--cache-dir DIR or YOLO_CACHE_DIR=DIR " +
                                 "keeps the cache of a read-only dataset elsewhere)");
      }
      const cv::Mat im = resize_to_imgsz(read_image(files_[i]), imgsz, augment);
      std::vector<uchar> png;
      if (!cv::imencode(".png", im, png, {cv::IMWRITE_PNG_COMPRESSION, kPngLevel})) {
        throw std::runtime_error(files_[i] + ": cannot encode it for the disk cache");
      }
      write_file_atomic(paths_[i], std::string(png.begin(), png.end()));
      ++written;
    });
  } catch (const std::exception& e) {
    problem = e.what();
  }
  stats_.written = written;
  if (ranks && ranks->size() > 1) {
    problem = agree_on_problem(*ranks, "every rank's share of the disk image cache", problem);
  }
  if (!problem.empty()) throw std::runtime_error(problem);
  if (!ranks || ranks->rank() == 0) {
    for (const size_t i : stored) {
      std::error_code ec;
      const auto b = fs::file_size(paths_[i], ec);
      if (!ec) stats_.bytes += static_cast<int64_t>(b);
    }
  }
}

cv::Mat DiskImageCache::load(size_t i) const {
  if (paths_[i].empty()) return {};
  std::ifstream in(paths_[i], std::ios::binary);
  std::vector<uchar> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  cv::Mat im;
  if (!bytes.empty()) im = cv::imdecode(bytes, cv::IMREAD_COLOR);
  if (!im.empty() && im.size() == resized_[i]) return im;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    log_warn("--cache disk: " + paths_[i] + " is not the cached image of " + files_[i] +
             " (missing, truncated or replaced); reading the image instead. Delete the .cache " +
             "files to have them written again");
  }
  return {};
}

}  // namespace yolo

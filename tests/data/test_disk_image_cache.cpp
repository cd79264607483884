// --cache disk: images resized to imgsz kept as PNG files, read back with the pixels resizing
// gives; outdated and damaged files not used; ranks writing a share each; a cache folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/disk_image_cache.h"
#include "data/image_io.h"
#include "test_helpers.h"
#include "thread_ranks.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::Board;
using yolo::test::TempDir;
using yolo::test::ThreadRanks;
using yolo::test::write_image;

namespace {

// A smooth image with some texture, as photos are (PNG compresses it).
cv::Mat photo_like(int w, int h, int seed) {
  cv::Mat im(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      im.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<uchar>((x + seed) % 256), static_cast<uchar>((y * 2) % 256),
                    static_cast<uchar>((x * y / 7 + seed) % 256));
    }
  }
  return im;
}

// n images of w x h in dir as JPEGs; returns their paths and sizes.
std::vector<std::string> write_images(const std::string& dir, int n, int w, int h,
                                      std::vector<cv::Size>& sizes) {
  std::vector<std::string> files;
  for (int i = 0; i < n; ++i) {
    files.push_back(dir + "/im" + std::to_string(i) + ".jpg");
    write_image(files.back(), photo_like(w, h, i));
    sizes.emplace_back(w, h);
  }
  return files;
}

double max_diff(const cv::Mat& a, const cv::Mat& b) { return cv::norm(a, b, cv::NORM_INF); }

}  // namespace

TEST(DiskImageCache, KeepsShrunkImagesLosslesslyAndReadsTheOthersFromTheirFiles) {
  TempDir d;
  std::vector<cv::Size> sizes;
  std::vector<std::string> files = write_images(d.path(), 2, 240, 160, sizes);
  const std::vector<std::string> small = write_images(d / "small", 1, 64, 40, sizes);
  files.push_back(small[0]);
  for (const bool augment : {false, true}) {
    SCOPED_TRACE(augment);
    const DiskImageCache cache(files, sizes, 64, augment, "", nullptr, 2);
    EXPECT_EQ(cache.stats().stored, 2u);
    EXPECT_EQ(cache.stats().direct, 1u);
    EXPECT_EQ(cache.stats().written, 2u);
    for (size_t i = 0; i < 2; ++i) {
      const std::string path = DiskImageCache::path_for(files[i], 64, augment, "");
      EXPECT_EQ(path, files[i] + (augment ? ".64-linear.cache" : ".64-area.cache"));
      ASSERT_TRUE(fs::exists(path));
      const cv::Mat got = cache.load(i);
      ASSERT_EQ(got.size(), cv::Size(64, 43));
      EXPECT_EQ(max_diff(got, resize_to_imgsz(read_image(files[i]), 64, augment)), 0);
    }
    EXPECT_TRUE(cache.load(2).empty());  // 64 px already: read from its own file
    EXPECT_FALSE(fs::exists(DiskImageCache::path_for(files[2], 64, augment, "")));
    // Far below the full-size .npy files of every image.
    EXPECT_GT(cache.stats().bytes, 0);
    EXPECT_LT(cache.stats().bytes * 10, cache.stats().npy_bytes);
  }
  const DiskImageCache again(files, sizes, 64, true, "", nullptr, 2);
  EXPECT_EQ(again.stats().written, 0u);  // reused
  EXPECT_EQ(again.stats().stored, 2u);
}

TEST(DiskImageCache, OutdatedAndDamagedFilesAreNotUsed) {
  TempDir d;
  std::vector<cv::Size> sizes;
  const std::vector<std::string> files = write_images(d.path(), 2, 200, 100, sizes);
  { const DiskImageCache first(files, sizes, 64, true, "", nullptr, 1); }
  // The image replaced after its cache was written: the cache is written again.
  write_image(files[0], photo_like(200, 100, 99));
  fs::last_write_time(files[0], fs::last_write_time(files[0]) + std::chrono::seconds(5));
  const DiskImageCache cache(files, sizes, 64, true, "", nullptr, 1);
  EXPECT_EQ(cache.stats().written, 1u);
  EXPECT_EQ(max_diff(cache.load(0), resize_to_imgsz(read_image(files[0]), 64, true)), 0);
  // A truncated cache file is not read as an image.
  const std::string path = DiskImageCache::path_for(files[1], 64, true, "");
  fs::resize_file(path, fs::file_size(path) / 2);
  EXPECT_TRUE(cache.load(1).empty());
  fs::remove(path);
  EXPECT_TRUE(cache.load(1).empty());
}

TEST(DiskImageCache, RanksWriteAShareEachAndReadEveryImage) {
  TempDir d;
  std::vector<cv::Size> sizes;
  const std::vector<std::string> files = write_images(d.path(), 6, 160, 96, sizes);
  Board board;
  std::vector<std::unique_ptr<DiskImageCache>> caches(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const ThreadRanks ranks(board, r, 2);
      caches[r] = std::make_unique<DiskImageCache>(files, sizes, 64, true, "", &ranks, 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(caches[0]->stats().written, 3u);
  EXPECT_EQ(caches[1]->stats().written, 3u);
  EXPECT_GT(caches[0]->stats().bytes, 0);  // rank 0 counts every file
  for (size_t i = 0; i < files.size(); ++i) {
    const cv::Mat want = resize_to_imgsz(read_image(files[i]), 64, true);
    EXPECT_EQ(max_diff(caches[0]->load(i), want), 0);
    EXPECT_EQ(max_diff(caches[1]->load(i), want), 0);
  }
}

TEST(DiskImageCache, ACacheFolderLeavesTheDatasetAlone) {
  TempDir d;
  std::vector<cv::Size> sizes;
  fs::create_directories(d / "data");
  const std::vector<std::string> files = write_images(d / "data", 2, 128, 128, sizes);
  fs::create_directories(d / "cache");
  const DiskImageCache cache(files, sizes, 64, false, d / "cache", nullptr, 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(d / "data"), fs::directory_iterator()), 2);
  EXPECT_EQ(std::distance(fs::directory_iterator(d / "cache"), fs::directory_iterator()), 2);
  EXPECT_EQ(cache.load(1).size(), cv::Size(64, 64));
}

TEST(DiskImageCache, ADamagedFileGivesTheSameSampleAsNoCache) {
  TempDir d;
  yolo::test::make_split(d.path(), "val", 3, 128, 96);
  DatasetOptions opt;
  opt.imgsz = 64;
  opt.nc = 2;
  opt.hyp = AugmentHyp::none();
  opt.image_cache_bytes = 0;
  YoloDataset plain({d / "images/val"}, opt);
  opt.cache = "disk";
  YoloDataset disk({d / "images/val"}, opt);
  const std::string damaged = DiskImageCache::path_for(disk.image_files()[1], 64, false, "");
  ASSERT_TRUE(fs::exists(damaged));
  std::ofstream(damaged, std::ios::trunc) << "not a png";
  for (size_t i = 0; i < 3; ++i) {
    Rng r1(i), r2(i);
    EXPECT_EQ(max_diff(plain.get(i, r1).image, disk.get(i, r2).image), 0);
  }
}

// --cache ram shared by the ranks of a machine: ranks as threads of this process, each mapping
// the one file in a temporary folder standing in for /dev/shm.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <opencv2/core.hpp>
#include <thread>

#include "data/shared_ram_cache.h"
#include "test_helpers.h"
#include "thread_ranks.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::Board;
using yolo::test::TempDir;
using yolo::test::ThreadRanks;

namespace {

cv::Mat image_of(size_t i, cv::Size sz) {
  cv::Mat m(sz, CV_8UC3);
  cv::randu(m, cv::Scalar::all(0), cv::Scalar::all(255));
  m.at<cv::Vec3b>(0, 0) = cv::Vec3b(static_cast<uchar>(i), 1, 2);
  return m;
}

// The caches `world` thread-ranks make; `loads[r]` counts what rank r decoded.
std::vector<std::unique_ptr<SharedRamCache>> make_on_ranks(const std::vector<cv::Size>& sizes,
                                                           const std::vector<cv::Mat>& images,
                                                           int world, const std::string& dir,
                                                           std::vector<int>& loads) {
  Board board;
  std::vector<std::unique_ptr<SharedRamCache>> caches(world);
  loads.assign(world, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      const ThreadRanks ranks(board, r, world);
      caches[r] = SharedRamCache::create(
          sizes,
          [&](size_t i) {
            ++loads[r];
            return images[i].clone();
          },
          ranks, 1, dir);
    });
  }
  for (auto& t : threads) t.join();
  return caches;
}

}  // namespace

TEST(SharedRamCache, RanksFillTheirSharesAndEachSeesEveryImage) {
  TempDir d;
  std::vector<cv::Size> sizes;
  std::vector<cv::Mat> images;
  for (size_t i = 0; i < 7; ++i) {
    sizes.emplace_back(16 + static_cast<int>(i), 12);
    images.push_back(image_of(i, sizes.back()));
  }
  images[3] = image_of(3, {40, 40});  // larger than its slot: not cached, decoded when needed
  std::vector<int> loads;
  const auto caches = make_on_ranks(sizes, images, 2, d.path(), loads);
  EXPECT_EQ(loads, (std::vector<int>{3, 4}));  // each rank decoded its share only
  for (const auto& c : caches) {
    ASSERT_TRUE(c);
    for (size_t i = 0; i < images.size(); ++i) {
      const cv::Mat m = c->image(i);
      if (i == 3) {
        EXPECT_TRUE(m.empty());
        continue;
      }
      ASSERT_EQ(m.size(), images[i].size());
      EXPECT_EQ(cv::norm(m, images[i], cv::NORM_INF), 0) << "image " << i;
    }
  }
  // Unlinked once both ranks mapped it: nothing is left behind, whatever happens next.
  EXPECT_TRUE(fs::is_empty(d.path()));
}

TEST(SharedRamCache, AMachineWithoutTheSpaceMakesEveryRankGoWithout) {
  std::vector<int> loads;
  const std::vector<cv::Size> sizes{{8, 8}};
  const auto caches =
      make_on_ranks(sizes, {image_of(0, {8, 8})}, 2, "/no/such/shared/memory", loads);
  EXPECT_FALSE(caches[0]);
  EXPECT_FALSE(caches[1]);
  EXPECT_EQ(loads, (std::vector<int>{0, 0}));
}

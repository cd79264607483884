// Bad data that must be told apart from good data: a PNG named .jpg is a valid image (YOLOv5
// goes by content, not by name), a damaged label cache is rebuilt rather than trusted, and the
// temporary files of killed saves do not pile up.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "../data/test_helpers.h"
#include "data/label_cache.h"
#include "data/verify.h"
#include "utils/core/fs_atomic.h"

using yolo::test::TempDir;

TEST(BadData, PngNamedJpgIsNotCorrupt) {
  TempDir d;
  yolo::test::write_image(d / "im.png", cv::Mat(64, 64, CV_8UC3, cv::Scalar(1, 2, 3)));
  std::filesystem::rename(d / "im.png", d / "im.jpg");
  yolo::test::write_text(d / "im.txt", "0 0.5 0.5 0.2 0.2\n");
  const auto r = yolo::verify_image_label(d / "im.jpg", d / "im.txt", 1);
  EXPECT_FALSE(r.corrupt) << r.message;
  EXPECT_EQ(r.labels.size(), 1u);
}

TEST(BadData, TruncatedJpegNamedPngIsCorrupt) {
  TempDir d;
  cv::Mat im(64, 64, CV_8UC3);
  cv::randu(im, cv::Scalar::all(0), cv::Scalar::all(255));
  std::vector<uchar> buf;
  cv::imencode(".jpg", im, buf);
  yolo::test::write_text(d / "im.png", std::string(buf.begin(), buf.end() - 2));
  const auto r = yolo::verify_image_label(d / "im.png", d / "im.txt", 1);
  EXPECT_TRUE(r.corrupt);
  EXPECT_NE(r.message.find("FFD9"), std::string::npos) << r.message;
}

TEST(BadData, LabelCacheWithHugeCountsIsRejected) {
  yolo::LabelScan s;
  s.hash = 42;
  s.records.push_back({"a.png", 64, 64, {{0, 0.5f, 0.5f, 0.1f, 0.1f}}});
  const std::string good = yolo::encode_label_cache(s);
  yolo::LabelScan out;
  ASSERT_TRUE(yolo::decode_label_cache(good, 42, out));
  // Record count after magic (8), version (4), hash (8) and four counts (16).
  std::string bad = good;
  const uint32_t huge = 0xFFFFFFFFu;
  std::memcpy(&bad[36], &huge, 4);
  EXPECT_FALSE(yolo::decode_label_cache(bad, 42, out));
  // Every truncation of a valid cache is rejected too.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(yolo::decode_label_cache(good.substr(0, n), 42, out)) << n;
  }
}

TEST(BadData, StaleTemporariesOfKilledSavesAreSwept) {
  namespace fs = std::filesystem;
  TempDir d;
  // What SIGKILL during write_file_atomic leaves: ".<name>.tmpXXXXXX".
  const std::string old_tmp = d / ".last.pt.tmpAbC123", fresh_tmp = d / ".last.pt.tmpXyZ789",
                    other = d / ".best.pt.tmpAbC123";
  for (const auto& p : {old_tmp, fresh_tmp, other}) yolo::test::write_text(p, "partial");
  const auto hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(old_tmp, hour_ago);
  fs::last_write_time(other, hour_ago);
  yolo::write_file_atomic(d / "last.pt", "new");
  EXPECT_FALSE(fs::exists(old_tmp));
  EXPECT_TRUE(fs::exists(fresh_tmp)) << "a temporary file a live writer may still use was removed";
  EXPECT_TRUE(fs::exists(other)) << "another target's file was removed";
}

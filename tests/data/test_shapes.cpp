// The generated shapes dataset: layout, exact boxes, determinism, racing generators.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <sstream>
#include <thread>

#include "data/dataset.h"
#include "data/dataset_config.h"
#include "data/shapes_dataset.h"
#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::TempDir;
using yolo::test::write_text;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ShapesSpec small_spec() {
  ShapesSpec s;
  s.train = 6;
  s.val = 3;
  s.width = 128;
  return s;
}

}  // namespace

TEST(Shapes, LayoutAndExactBoxes) {
  TempDir d;
  const std::string root = d / "shapes";
  ensure_shapes_dataset(root, small_spec());
  EXPECT_TRUE(fs::exists(root + "/images/train/train_00005.png"));
  EXPECT_TRUE(fs::exists(root + "/labels/val/val_00002.txt"));
  EXPECT_EQ(shapes_class_names().size(), 3u);
  // A rectangle's box is exactly its pixels: the 4 corners inside share the centre's colour, and
  // each pixel just outside the box edges' midpoints differs from it.
  int rectangles = 0;
  for (int i = 0; i < 6; ++i) {
    char stem[32];
    std::snprintf(stem, sizeof stem, "train_%05d", i);
    const cv::Mat im = cv::imread(root + "/images/train/" + stem + ".png");
    ASSERT_FALSE(im.empty());
    EXPECT_EQ(im.cols, 128);
    std::istringstream labels(slurp(root + "/labels/train/" + stem + ".txt"));
    int cls;
    float cx, cy, w, h;
    while (labels >> cls >> cx >> cy >> w >> h) {
      ASSERT_GE(cls, 0);
      ASSERT_LE(cls, 2);
      const int x1 = int(std::lround((cx - w / 2) * im.cols)),
                x2 = int(std::lround((cx + w / 2) * im.cols)) - 1;
      const int y1 = int(std::lround((cy - h / 2) * im.rows)),
                y2 = int(std::lround((cy + h / 2) * im.rows)) - 1;
      ASSERT_GE(x1, 0);
      ASSERT_LT(x2, im.cols);
      ASSERT_LT(y2, im.rows);
      if (cls != 1) continue;
      ++rectangles;
      const cv::Vec3b c = im.at<cv::Vec3b>((y1 + y2) / 2, (x1 + x2) / 2);
      EXPECT_EQ(im.at<cv::Vec3b>(y1, x1), c);
      EXPECT_EQ(im.at<cv::Vec3b>(y2, x2), c);
    }
  }
  (void)rectangles;
  // The images load as a dataset without warnings of corrupt files.
  DatasetOptions opt;
  opt.nc = 3;
  opt.imgsz = 128;
  opt.hyp = AugmentHyp::none();
  YoloDataset ds({root + "/images/val"}, opt);
  EXPECT_EQ(ds.size(), 3u);
}

TEST(Shapes, DeterministicAndRaceSafe) {
  TempDir d;
  const std::string a = d / "a", b = d / "b";
  std::vector<std::thread> racers;
  for (int k = 0; k < 3; ++k) racers.emplace_back([&] { ensure_shapes_dataset(a, small_spec()); });
  for (auto& t : racers) t.join();
  ensure_shapes_dataset(b, small_spec());
  for (const char* f : {"/images/train/train_00003.png", "/labels/train/train_00003.txt",
                        "/labels/val/val_00001.txt"}) {
    EXPECT_EQ(slurp(a + f), slurp(b + f)) << f;
  }
  int entries = 0;
  for (const auto& e : fs::directory_iterator(d.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2);  // no temporary folders left behind
}

TEST(Shapes, YamlMarkerGeneratesMissingData) {
  TempDir d;
  write_text(d / "cfg/s.yaml",
             "path: ../data/shapes\ntrain: images/train\nval: images/val\n"
             "names: [circle, rectangle, triangle]\ngenerate: shapes\n");
  const auto cfg = load_dataset_config(d / "cfg/s.yaml");
  ensure_dataset(cfg);
  EXPECT_TRUE(fs::exists(d / "data/shapes/images/val/val_00099.png"));
  EXPECT_TRUE(fs::exists(d / "data/shapes/labels/train/train_00299.txt"));
}

TEST(Shapes, OnlyRankZeroGenerates) {
  TempDir d;
  write_text(d / "s.yaml",
             "path: shapes\ntrain: images/train\nval: images/val\nnames: [a, b, c]\n"
             "generate: shapes\n");
  const auto cfg = load_dataset_config(d / "s.yaml");
  int barriers = 0;
  // A non-zero rank waits at the barrier and never generates; here nobody else did, so it fails.
  EXPECT_THROW(ensure_dataset(cfg, false, [&] { ++barriers; }), std::runtime_error);
  EXPECT_EQ(barriers, 1);
  EXPECT_FALSE(fs::exists(d / "shapes"));
}

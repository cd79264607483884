// utils/plots: every plot is written, read back with OpenCV and checked for its size and for
// pixels of the colours it must contain where it must contain them.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <stdexcept>

#include "utils/viz/plots.h"

namespace yolo {
namespace {

namespace fs = std::filesystem;

class PlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("yolo_test_plots_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// Pixels of `img` inside `roi` within `tol` of `bgr` on every channel.
int count_color(const cv::Mat& img, const cv::Scalar& bgr, int tol, cv::Rect roi = {}) {
  if (roi.area() == 0) roi = cv::Rect(0, 0, img.cols, img.rows);
  int n = 0;
  for (int y = roi.y; y < roi.y + roi.height; ++y) {
    for (int x = roi.x; x < roi.x + roi.width; ++x) {
      const cv::Vec3b p = img.at<cv::Vec3b>(y, x);
      if (std::abs(p[0] - bgr[0]) <= tol && std::abs(p[1] - bgr[1]) <= tol &&
          std::abs(p[2] - bgr[2]) <= tol) {
        ++n;
      }
    }
  }
  return n;
}

bool near_color(const cv::Mat& img, int x, int y, const cv::Scalar& bgr, int tol) {
  return count_color(img, bgr, tol, cv::Rect(x, y, 1, 1)) == 1;
}

int non_white(const cv::Mat& img, cv::Rect roi = {}) {
  if (roi.area() == 0) roi = cv::Rect(0, 0, img.cols, img.rows);
  return roi.area() - count_color(img, cv::Scalar(255, 255, 255), 8, roi);
}

const char* kHeader =
    "               epoch,      train/box_loss,      train/obj_loss,      train/cls_loss,   "
    "metrics/precision,      metrics/recall,     metrics/mAP_0.5,metrics/mAP_0.5:0.95,        "
    "val/box_loss,        val/obj_loss,        val/cls_loss,               x/lr0,               "
    "x/lr1,               x/lr2";

std::string results_row(int epoch, bool with_nan = false) {
  const double t = epoch + 1.0;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%20d,%20.5g,%20.5g,%20.5g,%20.5g,%20.5g,%20s,%20.5g,%20.5g,%20.5g,%20.5g,%20.5g,"
                "%20.5g,%20.5g",
                epoch, 0.1 / t, 0.05 / t, 0.03 / t, 1 - 0.5 / t, 1 - 0.6 / t,
                with_nan ? "nan" : std::to_string(1 - 0.7 / t).c_str(), 0.5 - 0.3 / t, 0.09 / t,
                0.04 / t, 0.02 / t, 0.01, 0.01, 0.01);
  return buf;
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST_F(PlotsTest, ClassColorsArePaletteBgr) {
  EXPECT_EQ(class_color(0), cv::Scalar(0x38, 0x38, 0xFF));  // FF3838 as BGR
  EXPECT_EQ(class_color(20), class_color(0));
  EXPECT_EQ(class_color(-1), class_color(19));
}

TEST_F(PlotsTest, LabelsHaveHistogramBoxesAndHeatmaps) {
  std::vector<std::array<float, 5>> labels;
  for (int i = 0; i < 300; ++i) {
    const float c = i % 3 == 0 ? 1 : 0;  // class 0 twice as frequent as class 1
    labels.push_back({c, 0.2f + 0.002f * i, 0.3f + 0.001f * i, 0.1f + 0.001f * i, 0.2f});
  }
  const std::string path = file("sub/labels.jpg");  // parent folder does not exist yet
  plot_labels(labels, {"person", "car"}, path);
  const cv::Mat img = cv::imread(path);
  ASSERT_FALSE(img.empty());
  EXPECT_EQ(img.size(), cv::Size(1600, 1600));
  const cv::Rect hist(0, 0, 800, 800), boxes(800, 0, 800, 800);
  const int c0 = count_color(img, class_color(0), 30, hist);
  const int c1 = count_color(img, class_color(1), 30, hist);
  EXPECT_GT(c1, 1000);      // class 1's bar
  EXPECT_GT(c0, 1.5 * c1);  // class 0's bar is about twice as tall
  EXPECT_GT(count_color(img, class_color(0), 40, boxes), 200);    // centred box outlines
  EXPECT_GT(non_white(img, cv::Rect(0, 800, 800, 800)), 5000);    // x-y heatmap
  EXPECT_GT(non_white(img, cv::Rect(800, 800, 800, 800)), 5000);  // w-h heatmap
}

TEST_F(PlotsTest, LabelsWithoutLabelsStillWrite) {
  const std::string path = file("labels.jpg");
  EXPECT_NO_THROW(plot_labels({}, {}, path));
  EXPECT_FALSE(cv::imread(path).empty());
}

TEST_F(PlotsTest, ImagesFromTensorDrawBoxesInTheirTiles) {
  const int64_t h = 64, w = 80;
  const at::Tensor images = torch::full({4, 3, h, w}, 0.5f);  // 0..1 input, grey
  // Image 0: a normalised label of class 0; image 3: a pixel label of class 2.
  const at::Tensor targets =
      torch::tensor({{0.f, 0.f, 0.5f, 0.5f, 0.5f, 0.5f}, {3.f, 2.f, 40.f, 32.f, 40.f, 30.f}});
  const std::string path = file("train_batch0.jpg");
  plot_images(images, targets, {"a/im0.jpg", "b/im1.jpg", "c/im2.jpg", "d/im3.jpg"}, {}, path);
  const cv::Mat img = cv::imread(path);
  ASSERT_FALSE(img.empty());
  EXPECT_EQ(img.size(), cv::Size(2 * w, 2 * h));  // 2x2 grid
  // Tile 0 at (0, 0): box from (20, 16) to (60, 48); left edge at mid-height.
  EXPECT_TRUE(near_color(img, 20, 32, class_color(0), 40));
  // Tile 3 is at column 1, row 1 (filled column by column): origin (80, 64).
  EXPECT_TRUE(near_color(img, 80 + 20, 64 + 32, class_color(2), 40));
  // Tiles without boxes keep the image (grey 128) away from text.
  EXPECT_TRUE(near_color(img, 40, 64 + 50, cv::Scalar(128, 128, 128), 12));
}

TEST_F(PlotsTest, PredictionsBelowConfidenceThresholdAreNotDrawn) {
  const at::Tensor images = torch::full({1, 3, 100, 100}, 128, torch::kUInt8);  // 0..255 input
  const at::Tensor preds = torch::tensor(
      {{0.f, 1.f, 0.3f, 0.5f, 0.2f, 0.4f, 0.9f}, {0.f, 4.f, 0.7f, 0.5f, 0.2f, 0.4f, 0.1f}});
  const std::string path = file("val_batch0_pred.jpg");
  plot_images(images, preds, {}, {"a", "b", "c", "d", "e"}, path);
  const cv::Mat img = cv::imread(path);
  ASSERT_EQ(img.size(), cv::Size(100, 100));
  EXPECT_TRUE(near_color(img, 20, 60, class_color(1), 40));  // conf 0.9: left edge at x=20
  EXPECT_TRUE(near_color(img, 60, 60, cv::Scalar(128, 128, 128), 12));  // conf 0.1: not drawn
  EXPECT_EQ(count_color(img, class_color(4), 25, cv::Rect(55, 20, 40, 70)), 0);
}

TEST_F(PlotsTest, LargeBatchMosaicIsLimitedTo1920Pixels) {
  std::vector<cv::Mat> images(20, cv::Mat(640, 640, CV_8UC3, cv::Scalar(30, 60, 90)));
  std::vector<PlotTarget> targets;
  for (int i = 0; i < 20; ++i) targets.push_back({i, i % 5, 0.5f, 0.5f, 0.4f, 0.4f});
  const std::string path = file("train_batch1.jpg");
  plot_images(images, targets, {}, {}, path);  // 16 of 20 images, 4x4
  const cv::Mat img = cv::imread(path);
  EXPECT_EQ(img.size(), cv::Size(1920, 1920));
  // Tile 5 (column 1, row 1) at 480 px per tile: box left edge at 480 + 0.3 * 480.
  EXPECT_TRUE(near_color(img, 480 + 144, 480 + 240, class_color(0), 40));
  EXPECT_THROW(plot_images(std::vector<cv::Mat>{}, {}, {}, {}, path), std::invalid_argument);
}

TEST_F(PlotsTest, ReadsResultsCsvWithOneAndManyRows) {
  const std::string one = file("one/results.csv");
  write_text(one, std::string(kHeader) + "\n" + results_row(0) + "\n");
  const ResultsTable t1 = read_results_csv(one);
  ASSERT_EQ(t1.columns.size(), 14u);
  EXPECT_EQ(t1.columns[0], "epoch");
  EXPECT_EQ(t1.columns[7], "metrics/mAP_0.5:0.95");
  EXPECT_EQ(t1.columns[13], "x/lr2");
  ASSERT_EQ(t1.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(t1.rows[0][0], 0);
  EXPECT_NEAR(t1.rows[0][1], 0.1, 1e-9);

  const std::string many = file("many/results.csv");
  std::string text = std::string(kHeader) + "\n";
  for (int e = 0; e < 30; ++e) text += results_row(e, e == 7) + "\n";
  write_text(many, text);
  const ResultsTable t2 = read_results_csv(many);
  ASSERT_EQ(t2.rows.size(), 30u);
  EXPECT_DOUBLE_EQ(t2.rows[29][0], 29);
  EXPECT_TRUE(std::isnan(t2.rows[7][6]));
  EXPECT_NEAR(t2.rows[9][4], 1 - 0.5 / 10, 1e-6);
}

TEST_F(PlotsTest, PlotsResultsFromOneRowAndFromManyRowsWithNan) {
  for (int rows : {1, 30}) {
    const std::string csv = file(std::to_string(rows) + "/results.csv");
    std::string text = std::string(kHeader) + "\n";
    for (int e = 0; e < rows; ++e) text += results_row(e, e == 3) + "\n";
    write_text(csv, text);
    const std::string png = file(std::to_string(rows) + "/results.png");
    ASSERT_NO_THROW(plot_results(csv, png));
    const cv::Mat img = cv::imread(png);
    ASSERT_EQ(img.size(), cv::Size(2400, 1200));
    // Data (matplotlib C0 blue) in the first panel and in the last (mAP@0.5:0.95).
    const cv::Scalar c0(0xb4, 0x77, 0x1f);
    EXPECT_GT(count_color(img, c0, 10, cv::Rect(0, 0, 480, 600)), 20) << rows;
    EXPECT_GT(count_color(img, c0, 10, cv::Rect(1920, 600, 480, 600)), 20) << rows;
  }
}

TEST_F(PlotsTest, MalformedResultsCsvNamesFileAndLine) {
  const std::string csv = file("bad/results.csv");
  write_text(csv, std::string(kHeader) + "\n" + results_row(0) + "\n1,2,3\n");
  try {
    read_results_csv(csv);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(csv + ":3:"), std::string::npos) << e.what();
  }
  write_text(csv, std::string(kHeader) + "\n" + results_row(0) + "\n" + results_row(1) + "\n" +
                      std::string(results_row(2)).replace(0, 20, "                 abc"));
  try {
    plot_results(csv, file("bad/results.png"));
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(csv + ":4:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("abc"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_results_csv(file("missing.csv")), std::runtime_error);
  write_text(csv, "a,b,c\n1,2,3\n");  // not YOLOv5's columns
  EXPECT_THROW(plot_results(csv, file("bad/results.png")), std::runtime_error);
}

std::vector<double> linspace01(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<double>(i) / (n - 1);
  return v;
}

TEST_F(PlotsTest, PrCurveDrawsClassesAndMean) {
  const std::vector<double> px = linspace01(1000);
  std::vector<std::vector<double>> py(3, std::vector<double>(1000));
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 1000; ++i) py[c][i] = 1 - std::pow(px[i], 2 + 2 * c);
  }
  const std::string path = file("PR_curve.png");
  plot_pr_curve(px, py, {0.7, 0.8, 0.9}, {"a", "b", "c"}, path);
  const cv::Mat img = cv::imread(path);
  ASSERT_EQ(img.size(), cv::Size(2250, 1500));
  EXPECT_GT(count_color(img, cv::Scalar(255, 0, 0), 0), 5000);        // thick mean (and legend)
  EXPECT_GT(count_color(img, cv::Scalar(0x0e, 0x7f, 0xff), 0), 500);  // class 1 in C1 orange

  // Over 20 classes: grey class lines, no per-class colours.
  std::vector<std::vector<double>> many(25, std::vector<double>(1000));
  for (int c = 0; c < 25; ++c) {
    for (int i = 0; i < 1000; ++i) many[c][i] = 1 - std::pow(px[i], 1 + 0.3 * c);
  }
  std::vector<std::string> names(25, "x");
  plot_pr_curve(px, many, std::vector<double>(25, 0.5), names, path);
  const cv::Mat img2 = cv::imread(path);
  EXPECT_EQ(count_color(img2, cv::Scalar(0x0e, 0x7f, 0xff), 0), 0);
  EXPECT_GT(count_color(img2, cv::Scalar(128, 128, 128), 0), 2000);
  EXPECT_THROW(plot_pr_curve(px, py, {0.5}, names, path), std::invalid_argument);
  EXPECT_THROW(plot_pr_curve({0, 1}, py, {0.7, 0.8, 0.9}, {}, path), std::invalid_argument);
}

TEST_F(PlotsTest, McCurveDrawsSmoothedMean) {
  const std::vector<double> px = linspace01(1000);
  std::vector<std::vector<double>> f1(2, std::vector<double>(1000));
  for (int i = 0; i < 1000; ++i) {
    f1[0][i] = 4 * px[i] * (1 - px[i]);
    f1[1][i] = 0.8 * f1[0][i];
  }
  const std::string path = file("F1_curve.png");
  plot_mc_curve(px, f1, {"a", "b"}, path, "Confidence", "F1");
  const cv::Mat img = cv::imread(path);
  ASSERT_EQ(img.size(), cv::Size(2250, 1500));
  EXPECT_GT(count_color(img, cv::Scalar(255, 0, 0), 0), 5000);
  EXPECT_NO_THROW(plot_mc_curve(px, {}, {}, file("P_curve.png"), "Confidence", "Precision"));
}

TEST_F(PlotsTest, ConfusionMatrixIsAColumnNormalisedHeatmap) {
  // Rows predicted, columns true; class 0 always right, class 1 half missed.
  const std::vector<std::vector<double>> m = {
      {10, 0, 0, 1}, {0, 5, 0, 0}, {0, 0, 0, 0}, {0, 5, 0, 0}};
  const std::string path = file("confusion_matrix.png");
  plot_confusion_matrix(m, {"cat", "dog", "bird"}, path);
  const cv::Mat img = cv::imread(path);
  ASSERT_EQ(img.size(), cv::Size(3000, 2250));
  const cv::Scalar darkest(0x6b, 0x30, 0x08);      // Blues at 1.0 (#08306b)
  EXPECT_GT(count_color(img, darkest, 2), 50000);  // cells at 1.00 (and the colour bar's top)
  EXPECT_THROW(plot_confusion_matrix({{1, 2}, {3}}, {}, path), std::invalid_argument);
  // Many classes: no cell text, numeric ticks, still drawn.
  std::vector<std::vector<double>> big(81, std::vector<double>(81, 0.0));
  for (int i = 0; i < 81; ++i) big[i][i] = 3;
  EXPECT_NO_THROW(plot_confusion_matrix(big, {}, path, false));
}

TEST_F(PlotsTest, WriteFailuresNameThePath) {
  const std::string blocker = file("not_a_folder");
  write_text(blocker, "x");
  const std::string path = blocker + "/labels.jpg";
  try {
    plot_labels({}, {}, path);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  const std::string bad_ext = file("plot.unknown");
  try {
    plot_confusion_matrix({{1}}, {}, bad_ext);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad_ext), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace yolo

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "utils/eval/metrics.h"

namespace {
std::vector<bool> flags(bool v) { return std::vector<bool>(10, v); }
}  // namespace

TEST(Metrics, IouThresholds) {
  const auto t = yolo::iou_thresholds();
  ASSERT_EQ(t.size(), 10u);
  EXPECT_DOUBLE_EQ(t.front(), 0.5);
  EXPECT_NEAR(t.back(), 0.95, 1e-12);
}

// A perfect detector scores 0.995 in YOLOv5: the 101-point curve ends at precision 0 at recall 1.
TEST(Metrics, PerfectCurveGivesYolov5s0995) {
  EXPECT_NEAR(yolo::compute_ap({1.0}, {1.0}), 0.995, 1e-9);
  EXPECT_NEAR(yolo::compute_ap({0.5, 1.0}, {1.0, 1.0}), 0.995, 1e-9);
}

TEST(Metrics, HandComputedAp) {
  // Two labels; predictions by confidence: TP, FP, TP.
  // recall 0.5, 0.5, 1; precision 1, 0.5, 2/3. Interpolated: 1 up to recall 0.5, 2/3 after.
  const double want = 0.49 + (1 + 2.0 / 3) / 2 * 0.01 + 2.0 / 3 * 0.49 + 2.0 / 3 / 2 * 0.01;
  EXPECT_NEAR(yolo::compute_ap({0.5, 0.5, 1.0}, {1.0, 0.5, 2.0 / 3}), want, 1e-9);
  const auto r = yolo::ap_per_class({flags(true), flags(false), flags(true)}, {0.9, 0.8, 0.7},
                                    {0, 0, 0}, {0, 0});
  ASSERT_EQ(r.classes, std::vector<int>{0});
  EXPECT_NEAR(r.ap[0][0], want, 1e-6);
  EXPECT_NEAR(r.map50, want, 1e-6);
  EXPECT_NEAR(r.map, want, 1e-6);
  EXPECT_NEAR(r.tp[0], 2, 1e-9);
}

// Where recall stops short of 1, Ultralytics 8.x drops precision to 0 right after the last point
// (its compute_ap repeats the last recall with precision 0); YOLOv5 falls linearly to recall 1.
TEST(Metrics, UltralyticsApDropsAfterTheLastRecall) {
  const auto ul = yolo::ApTail::kUltralytics;
  // Recall 0.5 at precision 1: 1 at x = 0 .. 0.49, 0 from x = 0.5 on (numpy's interp there).
  EXPECT_NEAR(yolo::compute_ap({0.5}, {1.0}, nullptr, ul), 0.49 + 0.005, 1e-9);
  EXPECT_NEAR(yolo::compute_ap({0.5}, {1.0}), 0.5 + 0.25, 1e-9);
  // Full recall: both rules agree.
  EXPECT_NEAR(yolo::compute_ap({0.5, 1.0}, {1.0, 1.0}, nullptr, ul), 0.995, 1e-9);
  const auto r = yolo::ap_per_class({flags(true), flags(false)}, {0.9, 0.8}, {0, 0}, {0, 0}, ul);
  EXPECT_NEAR(r.ap[0][0], 0.495, 1e-9);
}

TEST(Metrics, PerClassAndMeans) {
  // Class 0: one label, found. Class 1: two labels, only one found, plus a false positive.
  // Class 2: a label never predicted (AP 0). Class 3 is predicted but has no labels: ignored.
  std::vector<std::vector<bool>> tp{flags(true), flags(true), flags(false), flags(false)};
  std::vector<double> conf{0.9, 0.8, 0.6, 0.95};
  std::vector<int> pred_cls{0, 1, 1, 3};
  std::vector<int> target_cls{0, 1, 1, 2};
  const auto r = yolo::ap_per_class(tp, conf, pred_cls, target_cls);
  ASSERT_EQ(r.classes, (std::vector<int>{0, 1, 2}));
  EXPECT_NEAR(r.ap[0][0], 0.995, 1e-9);
  // Class 1: recall 0.5, 0.5; precision 1, 0.5: the curve is 1 up to recall 0.5, then falls
  // linearly from 0.5 to 0 at recall 1.
  EXPECT_NEAR(r.ap[1][0], 0.49 + 0.0075 + 0.125, 1e-9);
  EXPECT_EQ(r.ap[2][0], 0.0);
  EXPECT_NEAR(r.map50, (r.ap[0][0] + r.ap[1][0] + 0.0) / 3, 1e-12);
  EXPECT_EQ(r.p.size(), 3u);
  EXPECT_EQ(r.p[2], 0.0);
  EXPECT_EQ(r.r[2], 0.0);
  EXPECT_NEAR(r.p[0], 1.0, 1e-9);
  EXPECT_NEAR(r.r[0], 1.0, 1e-3);
}

TEST(Metrics, MatchPredictionsOneToOneByIou) {
  const torch::Tensor labels = torch::tensor({{0.f, 0.f, 0.f, 10.f, 10.f}});
  // Detection 0 has IoU 0.72 with the label, detection 1 IoU 1.0, detection 2 wrong class.
  const torch::Tensor det = torch::tensor({{0.f, 0.f, 10.f, 7.2f, 0.9f, 0.f},
                                           {0.f, 0.f, 10.f, 10.f, 0.8f, 0.f},
                                           {0.f, 0.f, 10.f, 10.f, 0.7f, 1.f}});
  const torch::Tensor c = yolo::match_predictions(det, labels, yolo::iou_thresholds());
  ASSERT_EQ(c.sizes(), (std::vector<int64_t>{3, 10}));
  // As YOLOv5's process_batch: among detections passing a threshold, each label goes to the one
  // that comes first (NMS output order: highest confidence), each detection is used once.
  EXPECT_EQ(c[0].sum().item<int64_t>(), 5);  // thresholds 0.5 .. 0.7
  EXPECT_EQ(c[1].sum().item<int64_t>(), 5);  // thresholds 0.75 .. 0.95, where det 0 fails
  EXPECT_FALSE(c[1][0].item<bool>());
  EXPECT_TRUE(c[1][9].item<bool>());
  EXPECT_EQ(c[2].sum().item<int64_t>(), 0);  // wrong class
  const torch::Tensor only0 =
      yolo::match_predictions(det.slice(0, 0, 1), labels, yolo::iou_thresholds());
  EXPECT_EQ(only0.sum().item<int64_t>(), 5);  // 0.72 >= 0.5 .. 0.7
}

TEST(Metrics, ConfusionMatrix) {
  yolo::ConfusionMatrix cm(3);
  const torch::Tensor labels = torch::tensor({{0.f, 0.f, 0.f, 10.f, 10.f},      // confused as 1
                                              {2.f, 50.f, 50.f, 60.f, 60.f}});  // missed
  const torch::Tensor det = torch::tensor({{0.f, 0.f, 10.f, 10.f, 0.9f, 1.f},
                                           {80.f, 80.f, 90.f, 90.f, 0.9f, 2.f},    // background
                                           {50.f, 50.f, 60.f, 60.f, 0.1f, 2.f}});  // below conf
  cm.process_batch(det, labels);
  const auto& m = cm.matrix();
  EXPECT_EQ(m[1][0], 1);
  EXPECT_EQ(m[3][2], 1);
  EXPECT_EQ(m[2][3], 1);
  double total = 0;
  for (const auto& r : m)
    for (double v : r) total += v;
  EXPECT_EQ(total, 3);
  cm.process_batch(torch::Tensor(), torch::tensor({{1.f, 0.f, 0.f, 1.f, 1.f}}));
  EXPECT_EQ(cm.matrix()[3][1], 1);
}

TEST(Metrics, Fitness) { EXPECT_NEAR(yolo::fitness(0.5, 0.3), 0.05 + 0.27, 1e-12); }

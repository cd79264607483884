#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdio>

#include "utils/core/runtime/cuda_env.h"
#include "utils/eval/boxes.h"
#include "utils/eval/nms.h"

using yolo::NmsOptions;

namespace {
// One prediction row: xywh, objectness, class scores.
std::vector<float> row(float x, float y, float w, float h, float obj, std::vector<float> cls) {
  std::vector<float> r{x, y, w, h, obj};
  r.insert(r.end(), cls.begin(), cls.end());
  return r;
}
torch::Tensor preds(const std::vector<std::vector<float>>& rows) {
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return torch::tensor(flat).view({1, static_cast<int64_t>(rows.size()), -1});
}
}  // namespace

TEST(Boxes, ConversionsAndIou) {
  const torch::Tensor xywh = torch::tensor({{50.f, 40.f, 20.f, 10.f}});
  const torch::Tensor xyxy = yolo::xywh2xyxy(xywh);
  EXPECT_TRUE(torch::allclose(xyxy, torch::tensor({{40.f, 35.f, 60.f, 45.f}})));
  EXPECT_TRUE(torch::allclose(yolo::xyxy2xywh(xyxy), xywh));
  const torch::Tensor a = torch::tensor({{0.f, 0.f, 10.f, 10.f}});
  const torch::Tensor b = torch::tensor({{5.f, 0.f, 15.f, 10.f}, {20.f, 20.f, 30.f, 30.f}});
  const torch::Tensor iou = yolo::box_iou(a, b);
  EXPECT_NEAR(iou[0][0].item<float>(), 50.f / 150.f, 1e-5);
  EXPECT_NEAR(iou[0][1].item<float>(), 0.f, 1e-6);
}

TEST(Boxes, ScaleBackFromLetterbox) {
  // 200x100 (w x h) original letterboxed into 320x320: gain 1.6, vertical pad 80.
  torch::Tensor b = torch::tensor({{32.f, 96.f, 192.f, 176.f}});
  yolo::scale_boxes(b, 320, 320, 100, 200);
  EXPECT_TRUE(torch::allclose(b, torch::tensor({{20.f, 10.f, 120.f, 60.f}}), 1e-4, 1e-4)) << b;
  torch::Tensor c = torch::tensor({{-10.f, -5.f, 500.f, 400.f}});
  yolo::clip_boxes(c, 100, 200);
  EXPECT_TRUE(torch::allclose(c, torch::tensor({{0.f, 0.f, 200.f, 100.f}})));
}

TEST(Nms, GreedySuppression) {
  const torch::Tensor boxes =
      torch::tensor({{0.f, 0.f, 10.f, 10.f}, {1.f, 1.f, 11.f, 11.f}, {50.f, 50.f, 60.f, 60.f}});
  const torch::Tensor scores = torch::tensor({0.8f, 0.9f, 0.3f});
  const torch::Tensor keep = yolo::nms(boxes, scores, 0.5);
  ASSERT_EQ(keep.size(0), 2);
  EXPECT_EQ(keep[0].item<int64_t>(), 1);
  EXPECT_EQ(keep[1].item<int64_t>(), 2);
  EXPECT_EQ(yolo::nms(boxes, scores, 0.9).size(0), 3);
}

// The textbook greedy NMS, one pair at a time, as the reference for the blocked version.
std::vector<int64_t> reference_nms(const torch::Tensor& boxes, const torch::Tensor& scores,
                                   float thres) {
  const torch::Tensor order = scores.argsort(0, /*descending=*/true);
  const auto b = boxes.accessor<float, 2>();
  const auto o = order.accessor<int64_t, 1>();
  const int64_t n = boxes.size(0);
  std::vector<char> gone(n, 0);
  std::vector<int64_t> keep;
  for (int64_t oi = 0; oi < n; ++oi) {
    const int64_t i = o[oi];
    if (gone[i]) continue;
    keep.push_back(i);
    for (int64_t oj = oi + 1; oj < n; ++oj) {
      const int64_t j = o[oj];
      const float w = std::max(0.f, std::min(b[i][2], b[j][2]) - std::max(b[i][0], b[j][0]));
      const float h = std::max(0.f, std::min(b[i][3], b[j][3]) - std::max(b[i][1], b[j][1]));
      const float ai = (b[i][2] - b[i][0]) * (b[i][3] - b[i][1]);
      const float aj = (b[j][2] - b[j][0]) * (b[j][3] - b[j][1]);
      if (w * h / (ai + aj - w * h) > thres) gone[j] = 1;
    }
  }
  return keep;
}

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Thousands of crowded boxes span several of the NMS's blocks: the kept set is exactly the
// pairwise greedy one, and a cap returns its first max_keep boxes.
TEST(Nms, BlockedEqualsPairwiseGreedyAndTheCapIsItsPrefix) {
  torch::manual_seed(3);
  const int64_t n = 3000;
  const torch::Tensor xy = torch::rand({n, 2}) * 200, wh = torch::rand({n, 2}) * 40 + 2;
  const torch::Tensor boxes = torch::cat({xy, xy + wh}, 1);
  const torch::Tensor scores = torch::rand({n});
  for (const float thres : {0.3f, 0.45f, 0.7f}) {
    const std::vector<int64_t> want = reference_nms(boxes, scores, thres);
    ASSERT_GT(want.size(), 600u);
    ASSERT_LT(want.size(), static_cast<size_t>(n));
    EXPECT_EQ(to_vector(yolo::nms(boxes, scores, thres)), want) << "iou " << thres;
    const std::vector<int64_t> capped = to_vector(yolo::nms(boxes, scores, thres, 300));
    EXPECT_EQ(capped, std::vector<int64_t>(want.begin(), want.begin() + 300)) << "iou " << thres;
  }
  EXPECT_EQ(yolo::nms(boxes, scores, 0.5, 0).size(0), 0);
  EXPECT_EQ(yolo::nms(boxes.slice(0, 0, 0), scores.slice(0, 0, 0), 0.5).size(0), 0);
}

TEST(Nms, ConfidenceIsObjectnessTimesClassAndClassesDoNotSuppressEachOther) {
  const auto p = preds({row(20, 20, 10, 10, 0.9f, {0.9f, 0.1f}),    // conf 0.81, class 0
                        row(21, 21, 10, 10, 0.8f, {0.1f, 0.9f}),    // conf 0.72, class 1
                        row(20.5, 20, 10, 10, 0.7f, {0.9f, 0.0f}),  // class 0, overlaps row 0
                        row(80, 80, 10, 10, 0.2f, {0.5f, 0.5f})});  // conf 0.1 < 0.25
  NmsOptions o;
  const auto out = yolo::non_max_suppression(p, o);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(0), 2);
  EXPECT_NEAR(out[0][0][4].item<float>(), 0.81f, 1e-5);
  EXPECT_EQ(out[0][0][5].item<float>(), 0.f);
  EXPECT_NEAR(out[0][1][4].item<float>(), 0.72f, 1e-5);
  EXPECT_EQ(out[0][1][5].item<float>(), 1.f);
  EXPECT_TRUE(torch::allclose(out[0][0].slice(0, 0, 4), torch::tensor({15.f, 15.f, 25.f, 25.f})));
  o.agnostic = true;
  EXPECT_EQ(yolo::non_max_suppression(p, o)[0].size(0), 1);
  o.agnostic = false;
  o.classes = {1};
  const auto only1 = yolo::non_max_suppression(p, o)[0];
  ASSERT_EQ(only1.size(0), 1);
  EXPECT_EQ(only1[0][5].item<float>(), 1.f);
}

TEST(Nms, MultiLabelAndMaxDet) {
  const auto p = preds({row(20, 20, 10, 10, 1.0f, {0.6f, 0.5f, 0.01f})});
  NmsOptions o;
  o.conf_thres = 0.001;
  o.multi_label = true;
  const auto out = yolo::non_max_suppression(p, o)[0];
  ASSERT_EQ(out.size(0), 3);  // every class above 0.001 is its own detection
  std::vector<std::vector<float>> many;
  for (int i = 0; i < 50; ++i) many.push_back(row(10.f + 30 * i, 10, 8, 8, 0.9f, {0.9f}));
  o.max_det = 7;
  EXPECT_EQ(yolo::non_max_suppression(preds(many), o)[0].size(0), 7);
}

TEST(Nms, EmptyAndBatched) {
  NmsOptions o;
  const auto out = yolo::non_max_suppression(torch::zeros({3, 10, 7}), o);
  ASSERT_EQ(out.size(), 3u);
  for (const auto& t : out) EXPECT_EQ(t.sizes(), (std::vector<int64_t>{0, 6}));
  o.iou_thres = 1.5;
  EXPECT_THROW(yolo::non_max_suppression(torch::zeros({1, 1, 6}), o), c10::Error);
}

// Model outputs for the batched NMS: boxes crowded into a 100 px field, so that most overlap, and
// with `coarse` scores on a 1/32 grid, so that many confidences tie.
torch::Tensor random_predictions(int64_t bs, int64_t n, int64_t nc, bool coarse) {
  const torch::Tensor xy = torch::rand({bs, n, 2}) * 100, wh = torch::rand({bs, n, 2}) * 30 + 1;
  torch::Tensor s = torch::rand({bs, n, 1 + nc});
  if (coarse) s = (s * 32).floor() / 32;
  return torch::cat({xy, wh, s}, 2);
}

// The GPU's batched NMS, run on the CPU, keeps exactly the per-image rows (boxes, confs, classes,
// order; equal confs in candidate order) over crowded images with tied confidences, one or
// several classes, multi-label or not, class filters, max_det reached and more than the 30000
// candidates an image may bring. On the CPU's own schedule it is the per-image pass.
TEST(Nms, BatchedKeepsThePerImageRows) {
  struct Case {
    const char* name;
    int64_t bs, n, nc;
    bool coarse;
    NmsOptions o;
  };
  NmsOptions val;  // the validator's
  val.conf_thres = 0.001;
  val.iou_thres = 0.6;
  val.multi_label = true;
  NmsOptions detect;
  NmsOptions agnostic = detect;
  agnostic.agnostic = true;
  agnostic.classes = {0, 2, 9};
  NmsOptions few = val;
  few.max_det = 7;
  few.iou_thres = 1;
  NmsOptions all = val;
  all.max_det = -1;
  all.iou_thres = 0.3;
  const std::vector<Case> cases = {{"val", 4, 2000, 3, true, val},
                                   {"val, one class", 3, 1500, 1, true, val},
                                   {"detect", 4, 2000, 5, true, detect},
                                   {"agnostic, classes", 3, 1500, 4, true, agnostic},
                                   {"max_det 7, iou 1", 3, 500, 3, true, few},
                                   {"no max_det", 3, 500, 2, false, all},
                                   {"over 30000", 2, 11000, 3, false, val}};
  torch::manual_seed(5);
  for (const Case& c : cases) {
    torch::Tensor p = random_predictions(c.bs, c.n, c.nc, c.coarse);
    p[1].select(1, 4).mul_(1e-4);  // an image with few or no candidates
    NmsOptions stable = c.o;
    stable.stable_ties = true;
    const std::vector<torch::Tensor> want = yolo::non_max_suppression(p, stable);
    size_t most = 0;
    for (const auto& w : want) most = std::max(most, static_cast<size_t>(w.size(0)));
    if (c.o.max_det > 0) {
      EXPECT_EQ(most, static_cast<size_t>(c.o.max_det)) << c.name;
    }
    for (const bool device_schedule : {true, false}) {
      const yolo::BatchDetections got =
          yolo::non_max_suppression_batched(p, device_schedule ? c.o : stable, device_schedule);
      ASSERT_EQ(got.size(), c.bs) << c.name;
      for (int64_t i = 0; i < c.bs; ++i) {
        const torch::Tensor g = got.image(i);
        ASSERT_EQ(g.sizes(), want[i].sizes()) << c.name << ", image " << i;
        EXPECT_TRUE(torch::equal(g, want[i]))
            << c.name << ", image " << i << (device_schedule ? ", device schedule" : "");
      }
    }
  }
}

// Lower-precision predictions are suppressed in float32; empty batches and images work.
TEST(Nms, BatchedHalfInputAndEmpty) {
  torch::manual_seed(6);
  NmsOptions o;
  o.conf_thres = 0.01;
  o.multi_label = true;
  const torch::Tensor p = random_predictions(3, 400, 3, false).to(torch::kHalf);
  o.stable_ties = true;  // float16 scores tie often
  const auto want = yolo::non_max_suppression(p.to(torch::kFloat), o);
  o.stable_ties = false;  // the batched NMS ranks so whatever the option
  const yolo::BatchDetections got = yolo::non_max_suppression_batched(p, o, true);
  ASSERT_EQ(got.kept.scalar_type(), torch::kFloat);
  for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(got.image(i), want[i])) << i;
  for (const bool device_schedule : {false, true}) {
    const auto none =
        yolo::non_max_suppression_batched(torch::zeros({3, 10, 7}), o, device_schedule);
    ASSERT_EQ(none.size(), 3);
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(none.image(i).sizes(), (std::vector<int64_t>{0, 6}));
    EXPECT_EQ(
        yolo::non_max_suppression_batched(torch::zeros({0, 10, 7}), o, device_schedule).size(), 0);
    EXPECT_EQ(yolo::non_max_suppression_batched(torch::zeros({2, 0, 7}), o, device_schedule).size(),
              2);
  }
}

// A batch's candidates are ranked a chunk of images at a time to bound the device's peak memory:
// any chunk size gives the rows of the whole batch at once.
TEST(Nms, DeviceScheduleInChunksKeepsTheSameRows) {
  torch::manual_seed(8);
  NmsOptions o;
  o.conf_thres = 0.001;
  o.iou_thres = 0.6;
  o.multi_label = true;
  const int64_t bs = 5, n = 1200, nc = 3;
  const torch::Tensor p = random_predictions(bs, n, nc, true);
  p[2].select(1, 4).mul_(1e-4);  // an image with few or no candidates
  const yolo::BatchDetections whole = yolo::non_max_suppression_batched(p, o, true);
  for (const int64_t images : {1, 2, 4}) {
    NmsOptions chunked = o;
    chunked.max_chunk_elements = images * n * nc;
    const yolo::BatchDetections got = yolo::non_max_suppression_batched(p, chunked, true);
    EXPECT_EQ(got.counts, whole.counts) << images << " images per chunk";
    EXPECT_TRUE(torch::equal(got.kept, whole.kept)) << images << " images per chunk";
  }
  NmsOptions tiny = o;
  tiny.max_chunk_elements = 1;  // below one image: one image per chunk
  EXPECT_TRUE(torch::equal(yolo::non_max_suppression_batched(p, tiny, true).kept, whole.kept));
}

// float16 predictions (detect --half) keep each class apart: the class offset (7680 per class)
// is added in float32, where in float16 class 9's and above overflow to inf and no box of theirs
// could suppress another.
TEST(Nms, Float16PredictionsSuppressWithinEachClass) {
  std::vector<float> c10(12, 0.0f), c11(12, 0.0f);
  c10[10] = 0.9f;
  c11[11] = 0.9f;
  const torch::Tensor p = preds({row(100, 100, 40, 40, 0.9f, c10), row(102, 101, 40, 40, 0.8f, c10),
                                 row(100, 100, 40, 40, 0.7f, c11)})
                              .to(torch::kHalf);
  NmsOptions o;
  const std::vector<torch::Tensor> out = yolo::non_max_suppression(p, o);
  ASSERT_EQ(out[0].size(0), 2) << "one box per class";
  EXPECT_EQ(out[0][0][5].item<float>(), 10.0f);
  EXPECT_EQ(out[0][1][5].item<float>(), 11.0f);
  EXPECT_EQ(yolo::non_max_suppression_batched(p, o, true).counts, std::vector<int64_t>{2});
}

// The device schedule on a GPU keeps the CPU's per-image rows, and a validation batch at 640 px
// (64 images x 25200 boxes x 80 classes, multi-label) needs well under the ~2.5 GiB its score
// tables would take at once.
TEST(Nms, CudaBatchedEqualsTheCpuRowsWithABoundedPeak) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(9);
  NmsOptions o;
  o.conf_thres = 0.001;
  o.iou_thres = 0.6;
  o.multi_label = true;
  const torch::Tensor p = random_predictions(6, 3000, 5, true);
  NmsOptions stable = o;
  stable.stable_ties = true;
  const std::vector<torch::Tensor> want = yolo::non_max_suppression(p, stable);
  const yolo::BatchDetections got = yolo::non_max_suppression_batched(p.to(cuda), o);
  for (int64_t i = 0; i < 6; ++i) {
    ASSERT_EQ(got.image(i).sizes(), want[i].sizes()) << "image " << i;
    EXPECT_TRUE(torch::allclose(got.image(i), want[i], 1e-6, 1e-6)) << "image " << i;
  }
  const torch::Tensor big = torch::rand({64, 25200, 85}, cuda);
  const double input_gib = static_cast<double>(big.nbytes()) / (1 << 30);
  torch::cuda::synchronize();
  yolo::cuda_reset_peak_memory(cuda);
  const yolo::BatchDetections kept = yolo::non_max_suppression_batched(big, o);
  const double extra = yolo::cuda_peak_allocated_gib(cuda) - input_gib;
  std::printf("device NMS of (64, 25200, 85): %.2f GiB above its input\n", extra);
  EXPECT_EQ(kept.size(), 64);
  EXPECT_LT(extra, 1.25);
}

// End-to-end heads: no suppression of overlapping boxes; the max_det best anchors, then their best
// (anchor, class) scores, one row per pair, filtered by conf and class.
TEST(TopkDetections, BestPairsWithoutSuppression) {
  const torch::Tensor p =
      preds({row(50, 50, 20, 20, 1, {0.9f, 0.8f}),  // two classes above 0.5
             row(51, 50, 20, 20, 1, {0.7f, 0.1f}),  // overlaps the first
             row(10, 10, 4, 4, 1, {0.2f, 0.6f}), row(90, 90, 4, 4, 1, {0.05f, 0.3f})});
  NmsOptions o;
  o.end2end = true;
  o.conf_thres = 0.5;
  o.max_det = 3;  // anchors 0, 1, 2, then the 3 best of their 6 scores
  const at::Tensor d = yolo::non_max_suppression(p, o)[0];
  ASSERT_EQ(d.size(0), 3);
  EXPECT_TRUE(torch::allclose(d.select(1, 4), torch::tensor({0.9f, 0.8f, 0.7f})));
  EXPECT_TRUE(torch::equal(d.select(1, 5), torch::tensor({0.f, 1.f, 0.f})));
  EXPECT_TRUE(torch::allclose(d[2].slice(0, 0, 4), torch::tensor({41.f, 40.f, 61.f, 60.f})));
  o.classes = {1};
  const at::Tensor one = yolo::non_max_suppression_batched(p, o).image(0);
  ASSERT_EQ(one.size(0), 1);
  EXPECT_FLOAT_EQ(one[0][4].item<float>(), 0.8f);
  o.classes.clear();
  o.agnostic = true;  // each anchor's best class alone
  o.max_det = 4;
  const at::Tensor agnostic = yolo::non_max_suppression(p, o)[0];
  ASSERT_EQ(agnostic.size(0), 3);
  EXPECT_TRUE(torch::allclose(agnostic.select(1, 4), torch::tensor({0.9f, 0.7f, 0.6f})));
}

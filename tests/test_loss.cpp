#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "utils/core/hyp.h"
#include "utils/eval/loss.h"

namespace {
// P3/P4/P5 anchors of yolov5*.yaml in stride units.
torch::Tensor anchors() {
  return torch::tensor({10.f / 8, 13.f / 8, 16.f / 8, 30.f / 8, 33.f / 8, 23.f / 8, 30.f / 16,
                        61.f / 16, 62.f / 16, 45.f / 16, 59.f / 16, 119.f / 16, 116.f / 32,
                        90.f / 32, 156.f / 32, 198.f / 32, 373.f / 32, 326.f / 32})
      .view({3, 3, 2});
}
std::vector<torch::Tensor> zero_maps(int64_t bs, int nc, int64_t size = 64) {
  return {torch::zeros({bs, 3, size / 8, size / 8, 5 + nc}),
          torch::zeros({bs, 3, size / 16, size / 16, 5 + nc}),
          torch::zeros({bs, 3, size / 32, size / 32, 5 + nc})};
}
}  // namespace

TEST(Loss, CiouHandComputed) {
  // Same-shaped boxes offset by one: IoU 1/3, enclosing diagonal^2 13, centre distance^2 1.
  const torch::Tensor a = torch::tensor({{0.f, 0.f, 2.f, 2.f}});
  const torch::Tensor b = torch::tensor({{1.f, 0.f, 2.f, 2.f}});
  EXPECT_NEAR(yolo::bbox_ciou(a, b)[0].item<float>(), 1.f / 3 - 1.f / 13, 1e-5);
  EXPECT_NEAR(yolo::bbox_ciou(a, a)[0].item<float>(), 1.f, 1e-5);
  // Aspect-ratio term: a 2x1 box inside a 2x2 box with the same centre.
  const torch::Tensor c = torch::tensor({{0.f, 0.f, 2.f, 1.f}});
  const double iou = 0.5, v = 4 / (M_PI * M_PI) * std::pow(std::atan(2.0) - std::atan(1.0), 2);
  const double alpha = v / (v - iou + 1);
  EXPECT_NEAR(yolo::bbox_ciou(a, c)[0].item<float>(), iou - (0 + v * alpha), 1e-5);
}

TEST(Loss, GainsScaleWithLayersClassesAndImageSize) {
  yolo::Hyp h;
  for (const auto& k : yolo::required_hyp_keys()) h.set(k, 0.0);
  h.set("box", 0.05);
  h.set("cls", 0.5);
  h.set("obj", 1.0);
  const auto g = yolo::scale_loss_gains(h, 3, 20, 320, 0.1);
  EXPECT_DOUBLE_EQ(g.box, 0.05);
  EXPECT_DOUBLE_EQ(g.cls, 0.5 * 20 / 80);
  EXPECT_DOUBLE_EQ(g.obj, 0.25);
  EXPECT_DOUBLE_EQ(g.label_smoothing, 0.1);
}

TEST(Loss, BuildTargetsAssignsCentreAndNeighbourCells) {
  yolo::ComputeLoss loss(yolo::LossGains{}, 2, anchors());
  // One box in image 0, class 1, centre (0.53, 0.53), size 0.1 x 0.1 of a 64 px image.
  const torch::Tensor targets = torch::tensor({{0.f, 1.f, 0.53f, 0.53f, 0.1f, 0.1f}});
  const auto t = loss.build_targets(zero_maps(1, 2), targets);
  // P3 (8x8 cells): w = 0.8 cells fits only anchor 0 (ratio < 4); centre 4.24 -> cells 4, and the
  // left/upper neighbours (fraction 0.24 < 0.5); the right/lower ones are not used.
  ASSERT_EQ(t.indices[0][0].size(0), 3);
  EXPECT_TRUE(torch::equal(t.indices[0][1], torch::tensor({0, 0, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(t.indices[0][3], torch::tensor({4, 3, 4}, torch::kLong)));  // gi
  EXPECT_TRUE(torch::equal(t.indices[0][2], torch::tensor({4, 4, 3}, torch::kLong)));  // gj
  EXPECT_TRUE(torch::allclose(t.tbox[0][1], torch::tensor({1.24f, 0.24f, 0.8f, 0.8f}), 1e-4, 1e-4));
  EXPECT_TRUE(torch::equal(t.tcls[0], torch::tensor({1, 1, 1}, torch::kLong)));
  // P5 (2x2 cells): 0.2 cells against anchors >= 2.8 cells: ratio > 4, no assignment.
  EXPECT_EQ(t.indices[2][0].size(0), 0);
}

TEST(Loss, NoTargetsLeavesOnlyObjectnessTowardsZero) {
  yolo::LossGains g;
  g.obj = 0.7;
  yolo::ComputeLoss loss(g, 3, anchors());
  const auto r = loss(zero_maps(2, 3), torch::zeros({0, 6}));
  // Every objectness logit is 0: BCE = log 2 on each level, balanced 4 + 1 + 0.4.
  const double lobj = std::log(2.0) * (4.0 + 1.0 + 0.4) * 0.7;
  EXPECT_NEAR(r.items[0].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(r.items[1].item<double>(), lobj, 1e-5);
  EXPECT_NEAR(r.items[2].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(r.loss.item<double>(), lobj * 2, 1e-5);  // times the batch size
}

TEST(Loss, ClassLossUsesSmoothedTargetsAndBackpropagates) {
  yolo::LossGains g;
  g.box = 1;
  g.obj = 1;
  g.cls = 1;
  g.label_smoothing = 0.2;
  yolo::ComputeLoss loss(g, 2, anchors());
  auto maps = zero_maps(1, 2);
  for (auto& m : maps) m.requires_grad_(true);
  const torch::Tensor targets = torch::tensor({{0.f, 1.f, 0.53f, 0.53f, 0.1f, 0.1f}});
  const auto r = loss(maps, targets);
  // Zero logits: class BCE is log 2 whatever the (smoothed) target, averaged over entries.
  EXPECT_NEAR(r.items[2].item<double>(), std::log(2.0), 1e-5);
  EXPECT_GT(r.items[0].item<double>(), 0.0);
  r.loss.backward();
  // Gradient on the class logits of an assigned cell: (sigmoid(0) - target) / entries.
  const torch::Tensor grad = maps[0].grad()[0][0][4][4];
  const double entries = 3 * 2;  // three assigned cells x two classes
  EXPECT_NEAR(grad[5].item<double>(), (0.5 - 0.1) / entries, 1e-5);  // cn = 0.1
  EXPECT_NEAR(grad[6].item<double>(), (0.5 - 0.9) / entries, 1e-5);  // cp = 0.9
}

TEST(Loss, FocalLossDownweightsEasyNegatives) {
  yolo::LossGains plain, focal;
  focal.fl_gamma = 1.5;
  auto maps = zero_maps(1, 1);
  for (auto& m : maps) m.select(4, 4).fill_(-6.0);  // confident "no object": easy negatives
  const auto a = yolo::ComputeLoss(plain, 1, anchors())(maps, torch::zeros({0, 6}));
  const auto b = yolo::ComputeLoss(focal, 1, anchors())(maps, torch::zeros({0, 6}));
  const double p = 1 / (1 + std::exp(6.0));
  // focal = bce * (1 - alpha) * p^gamma for negatives
  EXPECT_NEAR(b.items[1].item<double>() / a.items[1].item<double>(), 0.75 * std::pow(p, 1.5), 1e-6);
}

// Under autocast the predictions arrive in a low-precision type (float16 on CUDA, bfloat16 on the
// CPU); the loss must still add up in float32, or the small per-level terms round away.
TEST(Loss, LowPrecisionPredictionsGiveAFloat32Loss) {
  yolo::LossGains g;
  g.box = 0.05;
  g.obj = 1.0;
  g.cls = 0.5;
  g.cls_pw = g.obj_pw = 1.0;
  g.anchor_t = 4.0;
  yolo::ComputeLoss loss(g, 3, anchors());
  torch::manual_seed(0);
  std::vector<torch::Tensor> p = zero_maps(4, 3, 128);
  for (auto& m : p) m = torch::randn(m.sizes()) * 2;
  const torch::Tensor targets = torch::tensor({{0.f, 1.f, 0.5f, 0.5f, 0.2f, 0.3f},
                                               {1.f, 0.f, 0.25f, 0.7f, 0.1f, 0.1f},
                                               {3.f, 2.f, 0.8f, 0.2f, 0.4f, 0.3f}});
  const yolo::LossResult ref = loss(p, targets);
  std::vector<torch::Tensor> low;
  for (const auto& m : p) low.push_back(m.to(torch::kBFloat16));
  const yolo::LossResult r = loss(low, targets);
  EXPECT_EQ(r.loss.scalar_type(), torch::kFloat);
  EXPECT_EQ(r.items.scalar_type(), torch::kFloat);
  // Only the predictions' own rounding (bfloat16 keeps ~3 significant digits) is left.
  const torch::Tensor rel = ((r.items - ref.items).abs() / ref.items).max();
  EXPECT_LT(rel.item<double>(), 5e-3) << r.items << ref.items;
}

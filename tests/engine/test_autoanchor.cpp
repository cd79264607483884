// utils/autoanchor: YOLOv5's anchor metric on hand-made boxes, k-means + evolution on clustered
// boxes, and check_anchors keeping good anchors, replacing bad ones, deterministically.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>

#include "utils/engine/autoanchor.h"

namespace yolo {
namespace {

// YOLOv5 v7.0 default P3-P5 anchors, in pixels.
at::Tensor coco_anchors() {
  return torch::tensor({10.f, 13.f, 16.f, 30.f, 33.f, 23.f, 30.f, 61.f, 62.f, 45.f, 59.f, 119.f,
                        116.f, 90.f, 156.f, 198.f, 373.f, 326.f})
      .view({3, 3, 2});
}

// The formula as YOLOv5 writes it with tensors, to check the loop implementation against.
AnchorFit reference_metric(const at::Tensor& k, const at::Tensor& wh, double thr) {
  const at::Tensor r = wh.unsqueeze(1) / k.unsqueeze(0);
  const at::Tensor x = torch::min(r, 1 / r).amin(2);
  const at::Tensor best = std::get<0>(x.max(1));
  return {(best > 1 / thr).to(torch::kFloat).mean().item<double>(),
          (x > 1 / thr).to(torch::kFloat).sum(1).mean().item<double>()};
}

// A dataset of 640x480 images whose labels are the COCO anchors (jittered by up to +-20%).
struct Dataset {
  std::vector<std::array<float, 2>> image_wh;
  std::vector<std::vector<std::array<float, 2>>> labels_wh;
};
Dataset anchor_like_dataset(int images, uint32_t seed) {
  const at::Tensor a = coco_anchors().view({-1, 2});
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> jitter(0.8f, 1.2f);
  Dataset d;
  for (int i = 0; i < images; ++i) {
    d.image_wh.push_back({640, 480});
    std::vector<std::array<float, 2>> labels;
    for (int j = 0; j < 9; ++j) {
      // Training size: the long side 640, so the image is 640x480 and normalised w = px / 640.
      labels.push_back({a[j][0].item<float>() * jitter(gen) / 640.f,
                        a[j][1].item<float>() * jitter(gen) / 480.f});
    }
    d.labels_wh.push_back(labels);
  }
  return d;
}

TEST(AutoAnchorTest, MetricOnHandMadeBoxes) {
  const at::Tensor k = torch::tensor({10.f, 10.f, 100.f, 100.f}).view({2, 2});
  // Per box, anchors with min(r, 1/r) > 1/4: (10,10): 1; (25,25): 1 (0.4 and exactly 0.25);
  // (30,30): 2; (5,500): 0 (too elongated for both).
  const at::Tensor wh =
      torch::tensor({10.f, 10.f, 25.f, 25.f, 30.f, 30.f, 5.f, 500.f}).view({4, 2});
  const AnchorFit fit = anchor_metric(k, wh, 4.0);
  EXPECT_DOUBLE_EQ(fit.bpr, 0.75);
  EXPECT_DOUBLE_EQ(fit.aat, 1.0);

  const at::Tensor rand_wh = torch::rand({500, 2}) * 300 + 1;
  const AnchorFit a = anchor_metric(coco_anchors().view({-1, 2}), rand_wh, 4.0);
  const AnchorFit b = reference_metric(coco_anchors().view({-1, 2}), rand_wh, 4.0);
  EXPECT_NEAR(a.bpr, b.bpr, 1e-6);
  EXPECT_NEAR(a.aat, b.aat, 1e-5);

  const AnchorFit none = anchor_metric(k, torch::zeros({0, 2}), 4.0);
  EXPECT_EQ(none.bpr, 0);
  EXPECT_EQ(none.aat, 0);
  EXPECT_THROW(anchor_metric(k, torch::zeros({3, 3}), 4.0), std::invalid_argument);
}

TEST(AutoAnchorTest, KmeansFindsClustersSortedByArea) {
  std::mt19937 gen(3);
  std::normal_distribution<float> noise(1.0f, 0.05f);
  const float centres[3][2] = {{200, 180}, {10, 12}, {50, 40}};
  std::vector<float> v;
  for (int i = 0; i < 300; ++i) {
    v.push_back(centres[i % 3][0] * noise(gen));
    v.push_back(centres[i % 3][1] * noise(gen));
  }
  const at::Tensor wh = torch::tensor(v).view({-1, 2});
  const at::Tensor k = kmean_anchors(wh, 3, 640, 4.0, 200, 7);
  ASSERT_EQ(k.sizes(), (std::vector<int64_t>{3, 2}));
  const float expect[3][2] = {{10, 12}, {50, 40}, {200, 180}};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j)
      EXPECT_NEAR(k[i][j].item<float>(), expect[i][j], 0.2 * expect[i][j]);
  }
  EXPECT_TRUE(torch::equal(k, kmean_anchors(wh, 3, 640, 4.0, 200, 7)));  // same seed, same result
  EXPECT_GT(anchor_metric(k, wh, 4.0).bpr, 0.99);
  EXPECT_THROW(kmean_anchors(wh, 0, 640, 4.0, 10, 7), std::invalid_argument);
}

TEST(AutoAnchorTest, KmeansFallsBackToRandomInitOnTooFewPoints) {
  const at::Tensor wh = torch::tensor({30.f, 40.f, 1.f, 1.f}).view({2, 2});  // one box under 2 px
  const at::Tensor k = kmean_anchors(wh, 9, 640, 4.0, 100, 1);
  ASSERT_EQ(k.size(0), 9);
  EXPECT_TRUE(torch::isfinite(k).all().item<bool>());
  EXPECT_GE(k.min().item<float>(), 0.0f);
  const at::Tensor area = k.prod(1);
  EXPECT_TRUE((area.slice(0, 1) >= area.slice(0, 0, -1)).all().item<bool>());
}

TEST(AutoAnchorTest, KeepsAnchorsThatFit) {
  const Dataset d = anchor_like_dataset(40, 1);
  const at::Tensor anchors = coco_anchors();
  const AutoAnchorResult r =
      check_anchors(d.image_wh, d.labels_wh, anchors, {8, 16, 32}, 4.0, 640, 0);
  EXPECT_GT(r.bpr_before, 0.98);
  EXPECT_FALSE(r.replaced);
  EXPECT_EQ(r.bpr_after, r.bpr_before);
  EXPECT_TRUE(torch::equal(r.anchors_px, anchors));
  EXPECT_NE(r.message.find("Best Possible Recall (BPR). Current anchors are a good fit to "
                           "dataset OK"),
            std::string::npos)
      << r.message;
  EXPECT_EQ(r.message.rfind("AutoAnchor: ", 0), 0u);
}

TEST(AutoAnchorTest, ReplacesAnchorsThatAreFarTooBig) {
  const Dataset d = anchor_like_dataset(40, 2);
  const at::Tensor bad = coco_anchors() * 100;
  const AutoAnchorResult r = check_anchors(d.image_wh, d.labels_wh, bad, {8, 16, 32}, 4.0, 640, 0);
  EXPECT_LT(r.bpr_before, 0.1);
  ASSERT_TRUE(r.replaced) << r.message;
  EXPECT_GT(r.bpr_after, 0.98);
  ASSERT_EQ(r.anchors_px.sizes(), bad.sizes());
  EXPECT_EQ(r.anchors_px.dtype(), bad.dtype());
  const at::Tensor area = r.anchors_px.view({-1, 2}).prod(1);
  EXPECT_TRUE((area.slice(0, 1) >= area.slice(0, 0, -1)).all().item<bool>());  // small to large
  EXPECT_NE(r.message.find("poor fit"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("Done OK"), std::string::npos) << r.message;

  // Same seed, same anchors; another seed still fits.
  const AutoAnchorResult again =
      check_anchors(d.image_wh, d.labels_wh, bad, {8, 16, 32}, 4.0, 640, 0);
  EXPECT_TRUE(torch::equal(again.anchors_px, r.anchors_px));
  EXPECT_EQ(again.bpr_after, r.bpr_after);
  const AutoAnchorResult other =
      check_anchors(d.image_wh, d.labels_wh, bad, {8, 16, 32}, 4.0, 640, 99);
  EXPECT_GT(other.bpr_after, 0.98);
}

TEST(AutoAnchorTest, NewAnchorLayersFollowStrideOrder) {
  const Dataset d = anchor_like_dataset(20, 3);
  const AutoAnchorResult r =
      check_anchors(d.image_wh, d.labels_wh, coco_anchors() * 100, {32, 16, 8}, 4.0, 640, 0);
  ASSERT_TRUE(r.replaced);
  const at::Tensor layer_area = r.anchors_px.prod(-1).mean(-1);
  EXPECT_GT(layer_area[0].item<float>(), layer_area[2].item<float>());  // largest stride first
}

TEST(AutoAnchorTest, NoLabelsOrTinyDatasets) {
  const at::Tensor anchors = coco_anchors();
  const AutoAnchorResult empty = check_anchors({}, {}, anchors, {8, 16, 32}, 4.0, 640, 0);
  EXPECT_FALSE(empty.replaced);
  EXPECT_TRUE(torch::equal(empty.anchors_px, anchors));
  EXPECT_NE(empty.message.find("no labels"), std::string::npos);
  const AutoAnchorResult no_boxes =
      check_anchors({{640, 480}, {100, 200}}, {{}, {}}, anchors, {8, 16, 32}, 4.0, 640, 0);
  EXPECT_FALSE(no_boxes.replaced);

  // Two boxes for nine anchors: k-means cannot run, the random init still gives finite anchors.
  const AutoAnchorResult tiny = check_anchors({{640, 640}}, {{{0.5f, 0.5f}, {0.9f, 0.1f}}},
                                              anchors * 100, {8, 16, 32}, 4.0, 640, 0);
  EXPECT_TRUE(torch::isfinite(tiny.anchors_px).all().item<bool>());
  EXPECT_GE(tiny.bpr_after, tiny.bpr_before);
  EXPECT_FALSE(std::isnan(tiny.bpr_after));

  EXPECT_THROW(check_anchors({{0, 480}}, {{{0.1f, 0.1f}}}, anchors, {8, 16, 32}, 4.0, 640, 0),
               std::invalid_argument);
  EXPECT_THROW(check_anchors({}, {}, anchors, {8, 16}, 4.0, 640, 0), std::invalid_argument);
}

}  // namespace
}  // namespace yolo

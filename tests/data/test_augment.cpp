// Every transform keeps boxes on the pixels they label: draw a filled box of a colour, transform,
// and compare the label box with the bounding box of that colour's pixels.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "data/augment.h"
#include "test_helpers.h"

using namespace yolo;
using yolo::test::colour_bbox;
using yolo::test::draw_box_image;

namespace {

const cv::Scalar kRed(0, 0, 255);

// Pixel box of a normalised label on an image.
cv::Rect2f label_rect(const Label& l, const cv::Mat& im) {
  return {(l.cx - l.w / 2) * im.cols, (l.cy - l.h / 2) * im.rows, l.w * im.cols, l.h * im.rows};
}

void expect_box_matches(const cv::Rect2f& label, const cv::Rect& pixels, float tol) {
  EXPECT_NEAR(label.x, pixels.x, tol);
  EXPECT_NEAR(label.y, pixels.y, tol);
  EXPECT_NEAR(label.x + label.width, pixels.x + pixels.width, tol);
  EXPECT_NEAR(label.y + label.height, pixels.y + pixels.height, tol);
}

void expect_box_matches(const PixelBox& b, const cv::Rect& pixels, float tol) {
  expect_box_matches(cv::Rect2f(b.x1, b.y1, b.x2 - b.x1, b.y2 - b.y1), pixels, tol);
}

}  // namespace

TEST(Augment, HypFromYaml) {
  const auto h =
      AugmentHyp::from_yaml(YAML::Load("lr0: 0.01\nmosaic: 0.5\ndegrees: 10\n"), "h.yaml");
  EXPECT_DOUBLE_EQ(h.mosaic, 0.5);
  EXPECT_DOUBLE_EQ(h.degrees, 10);
  EXPECT_DOUBLE_EQ(h.fliplr, 0.5);  // default kept
  try {
    AugmentHyp::from_yaml(YAML::Load("a: 1\nfliplr: 1.5\n"), "h.yaml");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("h.yaml:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fliplr"), std::string::npos);
  }
  EXPECT_THROW(AugmentHyp::from_yaml(YAML::Load("scale: big\n"), "h"), std::runtime_error);
  EXPECT_THROW(AugmentHyp::from_yaml(YAML::Load("degrees: -1\n"), "h"), std::runtime_error);
  const auto m = AugmentHyp::from_map({{"mixup", 0.25}, {"lr0", 0.01}}, "hyp.yaml");
  EXPECT_DOUBLE_EQ(m.mixup, 0.25);
  EXPECT_DOUBLE_EQ(m.mosaic, 1.0);
  EXPECT_THROW(AugmentHyp::from_map({{"mosaic", 2.0}}, "hyp.yaml"), std::runtime_error);
}

TEST(Augment, ResizeToImgsz) {
  const cv::Mat im(100, 150, CV_8UC3, cv::Scalar::all(0));
  const cv::Mat r = resize_to_imgsz(im, 64, false);
  EXPECT_EQ(r.cols, 64);
  EXPECT_EQ(r.rows, 43);  // ceil(100 * 64 / 150)
  EXPECT_EQ(resize_to_imgsz(im, 150, true).data, im.data);
  EXPECT_EQ(resize_to_imgsz(im, 300, false).cols, 300);
}

TEST(Augment, LetterboxShapesAndBoxes) {
  cv::Mat im;
  const Label l = draw_box_image(im, 120, 80, cv::Rect(30, 20, 40, 30), kRed);
  // Fixed square output: scale 160/120, pad on top/bottom.
  auto lb = letterbox(im, cv::Size(160, 160), false);
  ASSERT_EQ(lb.image.size(), cv::Size(160, 160));
  EXPECT_NEAR(lb.ratio_w, 160.0 / 120, 1e-6);
  EXPECT_NEAR(lb.pad_h, (160 - 107) / 2.0, 1e-6);
  auto boxes = to_pixel_boxes({l}, lb.ratio_w * im.cols, lb.ratio_h * im.rows, lb.pad_w, lb.pad_h);
  expect_box_matches(boxes[0], colour_bbox(lb.image, kRed), 1.5f);
  // auto: pad only to the stride.
  lb = letterbox(im, cv::Size(160, 160), true, false, true, 32);
  EXPECT_EQ(lb.image.cols, 160);
  EXPECT_EQ(lb.image.rows % 32, 0);
  EXPECT_EQ(lb.image.rows, 128);
  // scaleFill: stretch.
  lb = letterbox(im, cv::Size(64, 64), false, true);
  EXPECT_EQ(lb.image.size(), cv::Size(64, 64));
  EXPECT_NEAR(lb.ratio_h, 64.0 / 80, 1e-6);
  boxes = to_pixel_boxes({l}, lb.ratio_w * im.cols, lb.ratio_h * im.rows, lb.pad_w, lb.pad_h);
  expect_box_matches(boxes[0], colour_bbox(lb.image, kRed), 1.5f);
  // No scaleup: small images stay small and are padded.
  lb = letterbox(im, cv::Size(256, 256), false, false, false);
  EXPECT_FLOAT_EQ(lb.ratio_w, 1.f);
  EXPECT_EQ(lb.image.size(), cv::Size(256, 256));
  EXPECT_FLOAT_EQ(lb.pad_w, 68.f);
}

TEST(Augment, BoxCandidates) {
  const PixelBox before{0, 0, 0, 40, 40};
  EXPECT_TRUE(box_candidate(before, {0, 0, 0, 30, 30}));
  EXPECT_FALSE(box_candidate(before, {0, 0, 0, 2, 30}));                   // too thin
  EXPECT_FALSE(box_candidate(before, {0, 0, 0, 10, 10}));                  // under 10% of the area
  EXPECT_FALSE(box_candidate({0, 0, 0, 400, 400}, {0, 0, 0, 500, 4.5f}));  // aspect > 100
  EXPECT_TRUE(box_candidate({0, 0, 0, 400, 4}, {0, 0, 0, 399, 4}));
}

TEST(Augment, RandomPerspectiveMovesBoxesWithPixels) {
  AugmentHyp hyp = AugmentHyp::none();
  hyp.degrees = 30, hyp.translate = 0.1, hyp.scale = 0.3, hyp.shear = 5, hyp.perspective = 0.0005;
  for (int trial = 0; trial < 12; ++trial) {
    Rng rng(trial);
    cv::Mat im;
    const Label l = draw_box_image(im, 128, 96, cv::Rect(40, 30, 36, 28), kRed);
    if (trial % 2) hyp.perspective = 0;
    PixelBoxes boxes = to_pixel_boxes({l}, im.cols, im.rows);
    const cv::Mat out = random_perspective(im, boxes, hyp, rng);
    ASSERT_EQ(out.size(), im.size());
    const cv::Rect px = colour_bbox(out, kRed, 60);
    if (boxes.empty()) continue;  // dropped by box_candidates (mostly outside)
    expect_box_matches(boxes[0], px, 2.5f);
  }
}

TEST(Augment, RandomPerspectiveBorderCrops) {
  AugmentHyp hyp = AugmentHyp::none();
  Rng rng(1);
  cv::Mat im(128, 128, CV_8UC3, cv::Scalar::all(0));
  PixelBoxes boxes{{0, 10, 10, 20, 20}};
  const cv::Mat out = random_perspective(im, boxes, hyp, rng, -32);
  EXPECT_EQ(out.size(), cv::Size(64, 64));
  // Identity affine with translation 0.5 * size: the centre maps to the output centre.
  ASSERT_EQ(boxes.size(), 0u);  // the box lies in the cropped border
}

TEST(Augment, MosaicPlacesFourImages) {
  const cv::Scalar colours[4] = {{0, 0, 255}, {0, 255, 0}, {255, 0, 0}, {0, 255, 255}};
  for (int trial = 0; trial < 8; ++trial) {
    std::array<cv::Mat, 4> ims;
    std::array<Labels, 4> labels;
    for (int k = 0; k < 4; ++k) {
      const int w = 64 - 8 * k, h = 48 + 4 * k;
      labels[k] = {draw_box_image(ims[k], w, h, cv::Rect(8 + k, 6, 20, 16 + k), colours[k], k)};
    }
    Rng rng(trial);
    PixelBoxes boxes;
    const cv::Mat canvas =
        mosaic4(ims, {&labels[0], &labels[1], &labels[2], &labels[3]}, 64, rng, boxes);
    ASSERT_EQ(canvas.size(), cv::Size(128, 128));
    ASSERT_EQ(boxes.size(), 4u);
    for (const auto& b : boxes) {
      const cv::Rect px = colour_bbox(canvas, colours[int(b.cls)], 10);
      if (b.x2 - b.x1 < 1 || b.y2 - b.y1 < 1) {
        EXPECT_TRUE(px.empty() || px.area() <= 0) << "visible pixels of a clipped-away box";
        continue;
      }
      expect_box_matches(b, px, 0.01f);
    }
  }
}

TEST(Augment, MixupBlendsAndConcatenates) {
  const cv::Mat a(32, 32, CV_8UC3, cv::Scalar::all(0)), b(32, 32, CV_8UC3, cv::Scalar::all(200));
  PixelBoxes ba{{0, 1, 1, 5, 5}};
  const PixelBoxes bb{{1, 2, 2, 9, 9}, {2, 3, 3, 8, 8}};
  Rng rng(3);
  const cv::Mat m = mixup(a, ba, b, bb, rng);
  EXPECT_EQ(ba.size(), 3u);
  const int v = m.at<cv::Vec3b>(5, 5)[0];
  EXPECT_GT(v, 60);  // r ~ Beta(32, 32) stays near 0.5
  EXPECT_LT(v, 140);
}

TEST(Augment, HsvChangesColoursOnly) {
  cv::Mat im(16, 16, CV_8UC3, cv::Scalar(30, 120, 200));
  cv::Mat same = im.clone();
  Rng rng(5);
  augment_hsv(same, 0, 0, 0, rng);
  EXPECT_EQ(cv::norm(same, im, cv::NORM_INF), 0);
  augment_hsv(same, 0.5, 0.7, 0.4, rng);
  EXPECT_EQ(same.size(), im.size());
  EXPECT_GT(cv::norm(same, im, cv::NORM_INF), 0);
}

TEST(Augment, FlipsMoveLabels) {
  cv::Mat im;
  Labels l = {draw_box_image(im, 100, 60, cv::Rect(10, 5, 30, 20), kRed)};
  flip_lr(im, l);
  expect_box_matches(label_rect(l[0], im), colour_bbox(im, kRed), 0.01f);
  flip_ud(im, l);
  expect_box_matches(label_rect(l[0], im), colour_bbox(im, kRed), 0.01f);
}

TEST(Augment, LabelConversionsClip) {
  const Labels l = to_labels({{1, -5, 10, 50, 200}}, 100, 100);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_NEAR(l[0].cx, 0.25, 1e-6);
  EXPECT_NEAR(l[0].h, (99.999 - 10) / 100, 1e-5);
  const PixelBoxes b = to_pixel_boxes(l, 100, 100, 3, 4);
  EXPECT_NEAR(b[0].x1, 3, 1e-4);
  EXPECT_NEAR(b[0].y1, 14, 1e-4);
}

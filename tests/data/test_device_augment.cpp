// The recipe path (YoloDataset::get_recipe + collate_recipes + render_batch) against the OpenCV
// path (get + collate + images_to_device) with the same seeds: labels and targets must be equal,
// images equal within 1 grey level in at most 0.1% of the values (measured on this project's CPU
// and OpenCV 4.6: equal). Small noisy images so that interpolation and HSV rounding are exercised.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <opencv2/imgproc.hpp>

#include "data/device_augment.h"
#include "data/loader.h"
#include "test_helpers.h"

using namespace yolo;
using yolo::test::TempDir;

namespace {

// n images of varied sizes: smoothed noise with 3 labelled filled boxes each.
void make_noisy_split(const std::string& root, int n) {
  const cv::Size sizes[] = {{96, 128}, {160, 120}, {128, 128}, {100, 150}, {150, 90}, {120, 160}};
  cv::RNG r(7);
  for (int i = 0; i < n; ++i) {
    const cv::Size sz = sizes[i % 6];
    cv::Mat im(sz, CV_8UC3);
    r.fill(im, cv::RNG::UNIFORM, 0, 256);
    cv::GaussianBlur(im, im, cv::Size(5, 5), 1.5);
    std::string lines;
    for (int k = 0; k < 3; ++k) {
      const int w = sz.width / 4 + k * 5, h = sz.height / 5 + k * 3;
      const int x = (k * 37 + i * 11) % (sz.width - w), y = (k * 23 + i * 7) % (sz.height - h);
      cv::rectangle(im, cv::Rect(x, y, w, h), cv::Scalar(30 * k, 200 - 40 * k, 60 + 50 * k),
                    cv::FILLED);
      char line[128];
      std::snprintf(line, sizeof line, "%d %.6f %.6f %.6f %.6f\n", k % 2, (x + w / 2.0) / sz.width,
                    (y + h / 2.0) / sz.height, double(w) / sz.width, double(h) / sz.height);
      lines += line;
    }
    const std::string stem = "im" + std::to_string(i);
    test::write_image(root + "/images/train/" + stem + ".png", im);
    test::write_text(root + "/labels/train/" + stem + ".txt", lines);
  }
}

DatasetOptions train_options() {
  DatasetOptions o;
  o.imgsz = 128;
  o.batch_size = 4;
  o.nc = 2;
  o.threads = 1;
  o.augment = true;
  o.hyp.degrees = 10, o.hyp.shear = 5, o.hyp.flipud = 0.5;  // scale, translate, HSV: defaults
  return o;
}

// Grey levels of a float 0..1 image batch.
at::Tensor levels(const at::Tensor& x) { return x.mul(255).round().to(torch::kInt); }

struct Outcome {
  int64_t max_diff = 0;
  double mean_diff = 0, differing = 0;  // differing: fraction of values not equal
};

// Samples (first + i) % size with seeds seed * 1000 + i, both ways; labels, targets, paths and
// shapes must agree exactly, and each rng must have made the same draws.
Outcome compare_paths(const YoloDataset& ds, size_t first, int batch, uint64_t seed) {
  std::vector<Sample> samples;
  std::vector<SampleRecipe> recipes;
  for (int i = 0; i < batch; ++i) {
    const size_t index = (first + i) % ds.size();
    Rng a(seed * 1000 + i), b(seed * 1000 + i);
    samples.push_back(ds.get(index, a));
    recipes.push_back(ds.get_recipe(index, b));
    EXPECT_EQ(a(), b()) << "different draws for sample " << index;
    const Labels& la = samples.back().labels;
    const Labels& lb = recipes.back().labels;
    EXPECT_EQ(la.size(), lb.size()) << "sample " << index;
    for (size_t k = 0; k < std::min(la.size(), lb.size()); ++k) {
      EXPECT_TRUE(la[k].cls == lb[k].cls && la[k].cx == lb[k].cx && la[k].cy == lb[k].cy &&
                  la[k].w == lb[k].w && la[k].h == lb[k].h)
          << "sample " << index << " label " << k;
    }
  }
  Batch cpu = collate(samples, /*float_images=*/false);
  RecipeBatch rb = collate_recipes(recipes);
  EXPECT_TRUE(torch::equal(cpu.targets, rb.targets));
  EXPECT_EQ(cpu.paths, rb.paths);
  for (size_t i = 0; i < cpu.shapes.size(); ++i) {
    EXPECT_EQ(cpu.shapes[i].valid, rb.shapes[i].valid);
    EXPECT_EQ(cpu.shapes[i].pad_w, rb.shapes[i].pad_w);
    EXPECT_EQ(cpu.shapes[i].ratio_h, rb.shapes[i].ratio_h);
  }
  const at::Tensor want = images_to_device(cpu.images, torch::kCPU);
  const at::Tensor got = render_batch(rb, torch::kCPU);
  EXPECT_EQ(want.sizes(), got.sizes());
  EXPECT_TRUE(got.is_contiguous());
  Outcome out;
  if (want.sizes() != got.sizes()) return out;
  const at::Tensor diff = (levels(want) - levels(got)).abs();
  out.max_diff = diff.max().item<int>();
  out.mean_diff = diff.to(torch::kDouble).mean().item<double>();
  out.differing = diff.ne(0).to(torch::kDouble).mean().item<double>();
  return out;
}

// Runs compare_paths over a few seeds and checks the stated tolerance.
void expect_same_images(const YoloDataset& ds, int batch, int seeds, const char* what) {
  Outcome worst;
  for (int s = 0; s < seeds; ++s) {
    const Outcome o = compare_paths(ds, static_cast<size_t>(s) * 3, batch, s + 1);
    worst.max_diff = std::max(worst.max_diff, o.max_diff);
    worst.mean_diff = std::max(worst.mean_diff, o.mean_diff);
    worst.differing = std::max(worst.differing, o.differing);
  }
  std::printf("%s: largest difference %lld grey levels, %.6f%% of values differ\n", what,
              static_cast<long long>(worst.max_diff), 100 * worst.differing);
  EXPECT_LE(worst.max_diff, 1) << what;
  EXPECT_LE(worst.differing, 1e-3) << what;
}

class DeviceAugment : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    make_noisy_split(dir_->path(), 8);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static YoloDataset dataset(const DatasetOptions& o) {
    return YoloDataset({*dir_ / "images/train"}, o);
  }
  static TempDir* dir_;
};

TempDir* DeviceAugment::dir_ = nullptr;

}  // namespace

TEST_F(DeviceAugment, MosaicAffineHsvFlips) {
  expect_same_images(dataset(train_options()), 8, 4, "mosaic, affine, HSV, flips");
}

TEST_F(DeviceAugment, MosaicPerspectiveMixup) {
  DatasetOptions o = train_options();
  o.hyp.perspective = 0.0005;
  o.hyp.mixup = 0.5;
  expect_same_images(dataset(o), 8, 4, "mosaic, perspective, mixup");
}

TEST_F(DeviceAugment, LetterboxAugmented) {
  DatasetOptions o = train_options();
  o.hyp.mosaic = 0.5;  // both kinds in one batch
  o.hyp.fliplr = 1;
  expect_same_images(dataset(o), 8, 3, "letterbox and mosaic, augmented");
}

TEST_F(DeviceAugment, RectShapesPaddedToTheBatch) {
  DatasetOptions o = train_options();
  o.rect = true;
  o.batch_size = 2;  // several rect shapes, so that a batch of 8 mixes sizes
  expect_same_images(dataset(o), 8, 2, "rect, augmented, mixed sizes");
  DatasetOptions val = o;
  val.augment = false;
  val.hyp = AugmentHyp::none();
  val.pad = 0.5;
  expect_same_images(dataset(val), 8, 1, "rect, not augmented");
}

// The comparison has teeth: a recipe rendered with one parameter changed no longer matches.
TEST_F(DeviceAugment, DifferentParametersDiffer) {
  const YoloDataset ds = dataset(train_options());
  Rng a(5), b(5);
  std::vector<Sample> samples{ds.get(0, a)};
  std::vector<SampleRecipe> recipes{ds.get_recipe(0, b)};
  recipes[0].flip_lr = !recipes[0].flip_lr;
  const at::Tensor want = images_to_device(collate(samples, false).images, torch::kCPU);
  RecipeBatch rb = collate_recipes(recipes);
  const at::Tensor got = render_batch(rb, torch::kCPU);
  EXPECT_GT((levels(want) - levels(got)).abs().to(torch::kDouble).mean().item<double>(), 5);
  Rng c(6);
  EXPECT_NE(ds.get_recipe(0, c).canvas.warp.M, recipes[0].canvas.warp.M);
}

TEST_F(DeviceAugment, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: CPU rendering only";
  DatasetOptions o = train_options();
  o.hyp.perspective = 0.0005;
  o.hyp.mixup = 0.5;
  const YoloDataset ds = dataset(o);
  std::vector<SampleRecipe> recipes;
  for (int i = 0; i < 8; ++i) {
    Rng rng(100 + i);
    recipes.push_back(ds.get_recipe(static_cast<size_t>(i), rng));
  }
  RecipeBatch rb = collate_recipes(recipes, /*pin_memory=*/true);
  const at::Tensor cpu = levels(render_batch(rb, torch::kCPU));
  const at::Tensor cuda = render_batch(rb, torch::Device(torch::kCUDA, 0));
  ASSERT_TRUE(cuda.is_cuda());
  const at::Tensor diff = (cpu - levels(cuda.cpu())).abs();
  std::printf("CUDA vs CPU rendering: largest difference %d grey levels, %.6f%% of values differ\n",
              diff.max().item<int>(), 100 * diff.ne(0).to(torch::kDouble).mean().item<double>());
  EXPECT_LE(diff.max().item<int>(), 1);
  EXPECT_LE(diff.ne(0).to(torch::kDouble).mean().item<double>(), 1e-3);
}

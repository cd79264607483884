// AutoBatch's arithmetic on memory profiles YOLOv5 printed, and its CPU answer.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "models/model_config.h"
#include "utils/core/paths.h"
#include "utils/engine/autobatch.h"

using yolo::AutoBatchProfile;

namespace {
AutoBatchProfile profile(std::vector<std::optional<double>> gb, double t, double r, double a) {
  AutoBatchProfile p;
  p.memory_gb = std::move(gb);
  p.total_gib = t, p.reserved_gib = r, p.allocated_gib = a;
  return p;
}
}  // namespace

// YOLOv5 v7.0 on an RTX 3070, yolov5n at 416 px: "AutoBatch: Using batch-size 146 for CUDA:0
// 6.24G/7.79G (80%)".
TEST(AutoBatch, RecordedRtx3070ProfileGivesYolov5sChoice) {
  const auto c =
      yolo::fit_batch_size(profile({0.069, 0.109, 0.187, 0.327, 0.707}, 7.79, 0.04, 0.01));
  EXPECT_EQ(c.batch_size, 146);
  EXPECT_FALSE(c.fallback);
  EXPECT_EQ(c.line, "AutoBatch: Using batch-size 146 for CUDA:0 6.24G/7.79G (80%)");
}

// YOLOv5 on an A100-40GB, yolov5s at 640 px, with the 0.9 fraction of its first release: "Using
// batch-size 179 for CUDA:0 35.6G/39.6G (90%)" (its inputs were printed rounded).
TEST(AutoBatch, RecordedA100ProfileAtFraction09) {
  const auto c =
      yolo::fit_batch_size(profile({0.296, 0.568, 1.007, 1.797, 3.280}, 39.6, 0.0996, 0.0813), 0.9);
  EXPECT_EQ(c.batch_size, 179);
  EXPECT_NEAR(c.fraction, 0.897, 0.001);
}

// Sizes that ran out of memory: the fit uses the others, and the choice stays below the first
// failure.
TEST(AutoBatch, ChoiceStaysBelowTheFirstFailedSize) {
  const auto c =
      yolo::fit_batch_size(profile({0.5, 1.0, 2.0, std::nullopt, std::nullopt}, 40, 0.1, 0.1));
  EXPECT_EQ(c.batch_size, 4);
  EXPECT_FALSE(c.fallback);
}

// A profile whose fit makes no sense (memory falling with the batch, or none at all) gives 16.
TEST(AutoBatch, AnomaliesFallBackTo16) {
  const auto falling = yolo::fit_batch_size(profile({3.0, 2.5, 2.0, 1.5, 1.0}, 8, 0.1, 0.1));
  EXPECT_EQ(falling.batch_size, 16);
  EXPECT_TRUE(falling.fallback);
  const auto none = yolo::fit_batch_size(
      profile({std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt}, 8, 0.1, 0.1));
  EXPECT_EQ(none.batch_size, 16);
  EXPECT_TRUE(none.fallback);
}

TEST(AutoBatch, OnTheCpuItIs16) {
  yolo::DetectionModel m(
      yolo::parse_model_spec_file(yolo::project_root() + "/configs/models/yolov5n.yaml"), 3);
  EXPECT_EQ(yolo::autobatch(m, 64, false, c10::Device(c10::kCPU)), 16);
}

// On a GPU: a batch size in range, and the model as it was (BatchNorm statistics, no gradients).
TEST(AutoBatch, CudaProfilesTheModelAndLeavesItAsItWas) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  yolo::DetectionModel m(
      yolo::parse_model_spec_file(yolo::project_root() + "/configs/models/yolov5n.yaml"), 3);
  const c10::Device cuda(c10::kCUDA, 0);
  m->to(cuda);
  m->train();
  std::vector<at::Tensor> before;
  for (const at::Tensor& t : m->buffers()) before.push_back(t.clone());
  const int b = yolo::autobatch(m, 320, true, cuda);
  EXPECT_GE(b, 1);
  EXPECT_LE(b, 1024);
  size_t i = 0;
  for (const at::Tensor& t : m->buffers()) EXPECT_TRUE(torch::equal(t, before[i++]));
  for (const at::Tensor& w : m->parameters()) EXPECT_FALSE(w.grad().defined());
  EXPECT_TRUE(m->is_training());
}

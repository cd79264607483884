// DataParallel's split / replicate / gather / reduce: on CPU with two CPU "devices" (the same code
// path as GPUs), and on two GPUs when a machine has them.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "models/yolo.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/grad_scaler.h"
#include "utils/distributed/data_parallel.h"

namespace {

yolo::DetectionModel tiny_model(int seed) {
  torch::manual_seed(seed);
  return yolo::build_model(yolo::project_root() + "/configs/models/yolov5n.yaml", 2);
}

// A loss over every raw output, with fixed random weights per element.
torch::Tensor weighted_sum(const std::vector<torch::Tensor>& raw, std::vector<torch::Tensor>& w) {
  if (w.empty()) {
    torch::manual_seed(3);
    for (const auto& r : raw) w.push_back(torch::randn(r.sizes()));
  }
  torch::Tensor s = torch::zeros({});
  for (size_t i = 0; i < raw.size(); ++i) s = s + (raw[i].cpu() * w[i]).sum();
  return s;
}

// With BatchNorm in eval mode nothing depends on how the batch is split: DP's gradients must be
// those of one device over the whole batch.
void expect_same_gradients(const std::vector<torch::Device>& devices) {
  yolo::DetectionModel single = tiny_model(1), master = tiny_model(1);
  single->to(devices[0]);
  master->to(devices[0]);
  single->eval();
  master->eval();
  yolo::DataParallel dp(master, devices);
  torch::manual_seed(5);
  const torch::Tensor x = torch::rand({5, 3, 64, 64}).to(devices[0]);  // uneven split: 3 + 2
  std::vector<torch::Tensor> w;
  weighted_sum(single->forward_raw(x), w).backward();
  weighted_sum(dp.forward(x), w).backward();
  dp.reduce_grads();
  const auto sp = single->named_parameters(), mp = master->named_parameters();
  for (const auto& kv : sp) {
    const torch::Tensor a = kv.value().grad().cpu(), b = mp[kv.key()].grad().cpu();
    EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-5))
        << kv.key() << " max diff " << (a - b).abs().max().item<double>();
  }
}

}  // namespace

TEST(DataParallel, GradientsEqualOneDeviceOverTheWholeBatch) {
  expect_same_gradients({torch::kCPU, torch::kCPU});
}

TEST(DataParallel, TrainModeBatchNormStatisticsArePerDevice) {
  yolo::DetectionModel master = tiny_model(1), ref = tiny_model(1);
  master->train();
  ref->train();
  yolo::DataParallel dp(master, {torch::kCPU, torch::kCPU});
  torch::manual_seed(5);
  const torch::Tensor x = torch::rand({4, 3, 64, 64});
  dp.forward(x);
  ref->forward_raw(x.slice(0, 0, 2));  // the master's chunk only, as torch.nn.DataParallel
  const auto a = master->named_buffers(), b = ref->named_buffers();
  EXPECT_TRUE(torch::allclose(a["model.0.bn.running_mean"], b["model.0.bn.running_mean"]));
  EXPECT_TRUE(torch::allclose(a["model.0.bn.running_var"], b["model.0.bn.running_var"]));
}

TEST(DataParallel, TwoGpus) {
  if (!torch::cuda::is_available() || torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "needs 2 CUDA devices";
  }
  expect_same_gradients({torch::Device(torch::kCUDA, 0), torch::Device(torch::kCUDA, 1)});
}

// Autocast is thread-local: the replica threads must run under the caller's, or their chunks come
// back in float32 while the master's are in the low-precision type (CPU autocast: bfloat16).
TEST(DataParallel, ReplicaThreadsRunUnderTheCallersAutocast) {
  yolo::DetectionModel single = tiny_model(1), master = tiny_model(1);
  single->eval();
  master->eval();
  yolo::DataParallel dp(master, {torch::kCPU, torch::kCPU});
  torch::manual_seed(5);
  const torch::Tensor x = torch::rand({4, 3, 64, 64});
  torch::NoGradGuard no_grad;
  yolo::AutocastScope autocast(true, torch::kCPU);
  const std::vector<torch::Tensor> ref = single->forward_raw(x), out = dp.forward(x);
  ASSERT_EQ(ref.size(), out.size());
  for (size_t l = 0; l < out.size(); ++l) {
    ASSERT_EQ(ref[l].scalar_type(), torch::kBFloat16);
    EXPECT_EQ(out[l].scalar_type(), torch::kBFloat16) << "level " << l;
    // The replica's half of the batch, computed in its own thread, matches the reference.
    const torch::Tensor a = ref[l].slice(0, 2).to(torch::kFloat);
    const torch::Tensor b = out[l].slice(0, 2).to(torch::kFloat);
    EXPECT_TRUE(torch::allclose(a, b, 1e-2, 1e-2))
        << "level " << l << " max diff " << (a - b).abs().max().item<double>();
  }
}

// Replicas are laid out as the master (channels-last on a GPU), so that the per-step weight copies
// and the gathered gradients move bytes without reordering them.
TEST(DataParallel, ReplicasAndTheirGradientsTakeTheMastersLayout) {
  const auto cl = at::MemoryFormat::ChannelsLast;
  yolo::DetectionModel master = tiny_model(1);
  yolo::to_channels_last(*master);
  master->train();
  yolo::DataParallel dp(master, {torch::kCPU, torch::kCPU});
  torch::manual_seed(5);
  std::vector<torch::Tensor> w;
  weighted_sum(dp.forward(torch::rand({4, 3, 64, 64}).contiguous(cl)), w).backward();
  int checked = 0;
  for (const auto& p : dp.replica(0)->parameters()) {
    if (p.dim() != 4) continue;
    EXPECT_TRUE(p.is_contiguous(cl));
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(p.grad().is_contiguous(cl));
    ++checked;
  }
  EXPECT_GT(checked, 0);
  dp.reduce_grads();
  for (const auto& p : master->parameters()) {
    if (p.dim() == 4) {
      EXPECT_TRUE(p.grad().is_contiguous(cl));
    }
  }
}

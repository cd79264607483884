// The training step's GPU pieces: the fused optimizers on channels-last CUDA parameters against the
// CPU's multi-tensor updates, the gradient scaler on the device, the phase clock's CUDA events,
// and what the CPU can show of the same logic (the running loss that leaves non-finite steps out,
// the clock's host phases). The CUDA tests skip without a GPU and take seconds with one.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/grad_scaler.h"
#include "utils/core/runtime/torch_compat.h"
#include "utils/engine/optim.h"
#include "utils/engine/optimizer_step.h"
#include "utils/engine/phase_clock.h"
#include "utils/engine/running_loss.h"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

bool have_cuda() { return torch::cuda::is_available(); }

// ---- the running loss -------------------------------------------------------------------------

TEST(RunningLoss, MeanOfFiniteStepsEqualsThePlainRunningMean) {
  yolo::RunningLoss r(torch::kCPU);
  at::Tensor plain = torch::zeros({3});
  torch::manual_seed(1);
  for (int i = 0; i < 50; ++i) {
    const at::Tensor items = torch::rand({3}) * 5;
    plain = (plain * i + items) / (i + 1);  // the formula results.csv was recorded with
    r.add(items);
  }
  r.read();
  EXPECT_TRUE(torch::equal(r.mean(), plain)) << "bit for bit";
  EXPECT_EQ(r.finite_steps(), 50);
  EXPECT_EQ(r.nonfinite_run(), 0);
}

TEST(RunningLoss, NonFiniteStepsAreLeftOutAndCountedInARow) {
  yolo::RunningLoss r(torch::kCPU);
  r.add(torch::tensor({1.0f, 2.0f, 3.0f}));
  r.add(torch::tensor({kInf, 2.0f, 3.0f}));
  r.add(torch::tensor({1.0f, kNan, 3.0f}));
  r.read();
  EXPECT_TRUE(torch::equal(r.mean(), torch::tensor({1.0f, 2.0f, 3.0f})));
  EXPECT_EQ(r.finite_steps(), 1);
  EXPECT_EQ(r.nonfinite_run(), 2);
  r.add(torch::tensor({3.0f, 4.0f, 5.0f}));  // a finite step ends the run
  r.read();
  EXPECT_EQ(r.nonfinite_run(), 0);
  EXPECT_TRUE(torch::equal(r.mean(), torch::tensor({2.0f, 3.0f, 4.0f})));
  // The run carries over an epoch's start; the mean does not.
  r.add(torch::tensor({kNan, kNan, kNan}));
  r.start_epoch();
  r.add(torch::tensor({kInf, 0.0f, 0.0f}));
  r.read();
  EXPECT_EQ(r.nonfinite_run(), 2);
  EXPECT_EQ(r.finite_steps(), 0);
  EXPECT_TRUE(std::isnan(r.epoch_mean(0))) << "an epoch without a finite step reports NaN";
  EXPECT_TRUE(torch::equal(r.mean(), torch::zeros({3})));  // the progress line's zeros
}

TEST(RunningLoss, CudaAddsWithoutReadingTheDevice) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  yolo::RunningLoss gpu(cuda), cpu(torch::kCPU);
  const at::Tensor items = torch::tensor(
      {{0.5f, 0.25f, 0.125f}, {kInf, 1.0f, 1.0f}, {0.25f, 0.5f, 0.75f}, {kNan, 0.0f, 0.0f}});
  const at::Tensor on_gpu = items.to(cuda);
  torch::cuda::synchronize();
  yolo::set_cuda_sync_debug_error(true);  // any synchronising call throws
  try {
    for (int64_t i = 0; i < items.size(0); ++i) gpu.add(on_gpu[i]);
  } catch (const std::exception& e) {
    yolo::set_cuda_sync_debug_error(false);
    FAIL() << "add() synchronised: " << e.what();
  }
  yolo::set_cuda_sync_debug_error(false);
  for (int64_t i = 0; i < items.size(0); ++i) cpu.add(items[i]);
  gpu.read();
  cpu.read();
  EXPECT_TRUE(torch::allclose(gpu.mean(), cpu.mean()));
  EXPECT_EQ(gpu.finite_steps(), 2);
  EXPECT_EQ(gpu.nonfinite_run(), 1);
}

// ---- the phase clock --------------------------------------------------------------------------

TEST(PhaseClock, HostModeChargesEachLapToItsPhase) {
  yolo::PhaseClock clock(yolo::PhaseClock::Mode::kHost, torch::kCPU);
  double a = 0, b = 0;
  for (int step = 0; step < 2; ++step) {
    clock.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    clock.lap(&a);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    clock.lap(&b);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // between steps: no phase's
  }
  clock.flush();
  EXPECT_GE(a, 0.06);
  EXPECT_GE(b, 0.01);
  EXPECT_LT(a + b, 0.4) << "a phase took the time between steps";
  EXPECT_EQ(clock.pending(), 0u);
}

// Heavy kernels in one phase, light ones in the other: the GPU time lands in the phase that
// queued it, and a long epoch's boundaries are summed as the GPU passes them, without a wait.
TEST(PhaseClock, CudaEventsChargeGpuTimeToItsPhaseAndNeverWaitMidEpoch) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  yolo::PhaseClock clock(yolo::PhaseClock::Mode::kEvents, cuda);
  ASSERT_EQ(clock.mode(), yolo::PhaseClock::Mode::kEvents);
  const at::Tensor a = torch::rand({2048, 2048}, cuda);
  at::Tensor c = torch::mm(a, a);  // warm-up: cuBLAS' handle and workspace
  torch::cuda::synchronize();
  double heavy = 0, light = 0;
  auto steps = [&](int n) {
    for (int s = 0; s < n; ++s) {
      clock.start();
      if (s % 50 == 0) {
        for (int k = 0; k < 4; ++k) c = torch::mm(c, a).div_(2048);
      }
      clock.lap(&heavy);
      c.add_(1);
      clock.lap(&light);
    }
  };
  steps(100);                  // 300 boundaries, fewer than the clock collects at
  EXPECT_EQ(heavy, 0.0);       // nothing summed yet
  torch::cuda::synchronize();  // the test waits, so the GPU has passed them all
  yolo::set_cuda_sync_debug_error(true);
  try {
    steps(100);  // a start past 512 boundaries sums the first 300 without waiting
  } catch (const std::exception& e) {
    yolo::set_cuda_sync_debug_error(false);
    FAIL() << "the clock synchronised mid-epoch: " << e.what();
  }
  yolo::set_cuda_sync_debug_error(false);
  EXPECT_LT(clock.pending(), 400u) << "boundaries the GPU had passed were not summed";
  EXPECT_GT(heavy, 0.0);
  clock.flush();
  EXPECT_LE(clock.pending(), 1u);
  EXPECT_GT(light, 0.0);
  EXPECT_GT(heavy, light) << "16 large matmuls took less GPU time than 200 small adds";
}

// ---- the fused optimizers and the gradient scaler on CUDA ------------------------------------

struct Groups {
  yolo::ParamGroups groups;
  std::vector<at::Tensor> all;
};

// YOLOv5's three groups (biases, decayed weights, BN weights); conv weights 4-D and, on the GPU,
// channels-last as the trainer lays them out there.
Groups make_groups(const torch::Device& device) {
  torch::manual_seed(11);
  Groups g;
  auto add = [&](std::vector<at::Tensor>& into, std::vector<int64_t> shape) {
    at::Tensor t = torch::randn(shape).to(device);
    if (t.dim() == 4 && device.is_cuda()) t = t.contiguous(at::MemoryFormat::ChannelsLast);
    t.requires_grad_(true);
    into.push_back(t);
    g.all.push_back(t);
  };
  add(g.groups.bias, {16});
  add(g.groups.weight, {16, 8, 3, 3});
  add(g.groups.weight, {32, 16, 1, 1});
  add(g.groups.bn, {16});
  return g;
}

void set_grads(const Groups& g, int step) {
  torch::manual_seed(100 + step);
  for (const auto& p : g.all) {
    at::Tensor grad = torch::randn(p.sizes()).to(p.device());
    if (p.dim() == 4 && p.is_cuda()) grad = grad.contiguous(at::MemoryFormat::ChannelsLast);
    p.mutable_grad() = grad;
  }
}

class CudaFusedKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaFusedKernels, ChannelsLastStepsEqualCpuForeachAndSkipOnFoundInf) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
#ifndef YOLO_HAS_FUSED_OPTIMIZERS
  GTEST_SKIP() << "this LibTorch has no fused optimizer kernels";
#endif
  const std::string name = GetParam();
  const torch::Device cuda(torch::kCUDA, 0);
  Groups cpu = make_groups(torch::kCPU), gpu = make_groups(cuda);
  auto cpu_opt = yolo::make_optimizer(name, cpu.groups, 0.01, 0.9, 5e-4);
  auto gpu_opt = yolo::make_optimizer(name, gpu.groups, 0.01, 0.9, 5e-4);
  yolo::set_group_lr(*cpu_opt, 0, 0.1);  // as warmup: the bias group at another rate
  yolo::set_group_lr(*gpu_opt, 0, 0.1);
  yolo::OptimizerStep cpu_step(*cpu_opt, name, yolo::OptimizerStep::Kernel::kForeach);
  yolo::OptimizerStep gpu_step(*gpu_opt, name, yolo::OptimizerStep::Kernel::kFused);
  const at::Tensor clean = torch::zeros({}, cuda), found_inf = torch::ones({}, cuda);
  for (int s = 0; s < 5; ++s) {
    set_grads(gpu, s);
    if (s == 2) {  // AMP found inf/NaN: the kernels leave parameters and state as they were
      std::vector<at::Tensor> before;
      for (const auto& p : gpu.all) before.push_back(p.detach().clone());
      gpu.all[1].mutable_grad().fill_(kInf);
      gpu_step.step(found_inf);
      for (size_t i = 0; i < before.size(); ++i) {
        EXPECT_TRUE(torch::equal(before[i], gpu.all[i])) << name << ": skipped step moved " << i;
      }
      continue;
    }
    set_grads(cpu, s);
    cpu_step.step();
    gpu_step.step(clean);
    for (size_t i = 0; i < cpu.all.size(); ++i) {
      const at::Tensor a = cpu.all[i].detach(), b = gpu.all[i].detach().cpu();
      EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6))
          << name << " step " << s << " parameter " << i << ": max diff "
          << (a - b).abs().max().item<double>();
      if (gpu.all[i].dim() == 4) {
        EXPECT_TRUE(gpu.all[i].is_contiguous(at::MemoryFormat::ChannelsLast)) << "layout lost";
      }
    }
  }
  gpu_step.sync_state();  // Adam's step counts: the skipped step is not one
  if (name != "SGD") {
    const auto a = yolo::optimizer_state(*cpu_opt, name).toGenericDict().at("state");
    const auto b = yolo::optimizer_state(*gpu_opt, name).toGenericDict().at("state");
    EXPECT_EQ(a.toGenericDict().at(0).toGenericDict().at("step").toInt(),
              b.toGenericDict().at(0).toGenericDict().at("step").toInt());
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, CudaFusedKernels, ::testing::Values("SGD", "Adam", "AdamW"));

TEST(CudaGradScaler, UnscalesSkipsAndAdaptsTheScaleOnTheDevice) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  yolo::GradScaler s(true, 1024.0, 2.0, 0.5, 2);
  at::Tensor p = torch::ones({3, 4, 2, 2}, cuda)
                     .contiguous(at::MemoryFormat::ChannelsLast)
                     .requires_grad_(true);
  s.scale((p * 0.5).sum()).backward();
  ASSERT_TRUE(s.found_inf().defined());
  EXPECT_EQ(s.found_inf().device(), cuda);
  torch::cuda::synchronize();
  yolo::set_cuda_sync_debug_error(true);  // unscale and update never wait for the device
  try {
    s.unscale({p});
    s.update();
  } catch (const std::exception& e) {
    yolo::set_cuda_sync_debug_error(false);
    FAIL() << "the scaler synchronised: " << e.what();
  }
  yolo::set_cuda_sync_debug_error(false);
  EXPECT_TRUE(torch::allclose(p.grad().cpu(), torch::full({3, 4, 2, 2}, 0.5)));
  EXPECT_TRUE(s.should_step());
  EXPECT_EQ(s.current_scale(), 1024.0);
  p.mutable_grad()[1][2][0][1].fill_(kNan);
  s.unscale({p});
  EXPECT_FALSE(s.should_step());
  s.update();
  EXPECT_EQ(s.current_scale(), 512.0);
  p.mutable_grad() = torch::ones_like(p);
  for (int i = 0; i < 2; ++i) {
    s.unscale({p});
    s.update();
  }
  EXPECT_EQ(s.current_scale(), 1024.0);
}

}  // namespace

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "utils/core/errors.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/device.h"

TEST(Device, CpuAndAuto) {
  const auto cpu = yolo::select_device("cpu");
  EXPECT_TRUE(cpu.device.is_cpu());
  EXPECT_TRUE(cpu.cuda_ids.empty());
  EXPECT_TRUE(yolo::select_device(" CPU ").device.is_cpu());
  const auto autosel = yolo::select_device("");
  EXPECT_EQ(autosel.device.is_cuda(), torch::cuda::is_available());
}

TEST(Device, ParsesIndexLists) {
  EXPECT_EQ(yolo::parse_device_ids("0"), std::vector<int>{0});
  EXPECT_EQ(yolo::parse_device_ids("0,1,3"), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(yolo::parse_device_ids("cuda:1"), std::vector<int>{1});
  EXPECT_TRUE(yolo::parse_device_ids("").empty());
  EXPECT_THROW(yolo::parse_device_ids("gpu"), yolo::UsageError);
  EXPECT_THROW(yolo::parse_device_ids("0,,1"), yolo::UsageError);
  EXPECT_THROW(yolo::parse_device_ids("-1"), yolo::UsageError);
  EXPECT_THROW(yolo::parse_device_ids("1,1"), yolo::UsageError);
}

TEST(Device, MissingGpuIsAClearUsageError) {
  const int count = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  const std::string missing = std::to_string(count + 7);
  try {
    yolo::select_device(missing);
    FAIL() << "expected an error for --device " << missing;
  } catch (const yolo::UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--device"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
  }
}

TEST(Device, CudaSelectionWhenAvailable) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto sel = yolo::select_device("0");
  EXPECT_TRUE(sel.device.is_cuda());
  EXPECT_EQ(sel.device.index(), 0);
}

// Under DDP each local rank trains on its own GPU: the i-th of those listed in --device (YOLOv5
// sets CUDA_VISIBLE_DEVICES to the list), or cuda:LOCAL_RANK when --device did not list any.
TEST(Device, DdpRankTakesItsGpuFromTheDeviceList) {
  yolo::DeviceSelection listed;
  listed.device = c10::Device(c10::kCUDA, 2);
  listed.cuda_ids = {2, 3};
  listed.listed = true;
  EXPECT_EQ(yolo::rank_device(listed, 0, 2, 4).device, c10::Device(c10::kCUDA, 2));
  const yolo::DeviceSelection r1 = yolo::rank_device(listed, 1, 2, 4);
  EXPECT_EQ(r1.device, c10::Device(c10::kCUDA, 3));
  EXPECT_EQ(r1.cuda_ids, std::vector<int>{3});
  EXPECT_EQ(r1.description, "CUDA:3");

  yolo::DeviceSelection automatic = listed;
  automatic.cuda_ids = {0};
  automatic.listed = false;
  EXPECT_EQ(yolo::rank_device(automatic, 1, 2, 2).device, c10::Device(c10::kCUDA, 1));
}

TEST(Device, DdpWithFewerGpusThanRanksIsAUsageError) {
  yolo::DeviceSelection listed;
  listed.cuda_ids = {2, 3};
  listed.listed = true;
  try {
    yolo::rank_device(listed, 2, 3, 8);
    FAIL() << "3 ranks on 2 listed GPUs were accepted";
  } catch (const yolo::UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("insufficient CUDA devices for DDP command"), std::string::npos) << m;
    EXPECT_NE(m.find("--device lists 2"), std::string::npos) << m;
  }
  yolo::DeviceSelection automatic;
  automatic.cuda_ids = {0};
  EXPECT_THROW(yolo::rank_device(automatic, 1, 2, 1), yolo::UsageError);
}

// Training asks for cuDNN autotuning as YOLOv5 does, unless it must be deterministic.
TEST(Device, CudnnBenchmarkUnlessDeterministic) {
  auto& ctx = at::globalContext();
  yolo::configure_cudnn(false);
  EXPECT_TRUE(ctx.benchmarkCuDNN());
  EXPECT_FALSE(ctx.deterministicCuDNN());
  yolo::configure_cudnn(true);
  EXPECT_FALSE(ctx.benchmarkCuDNN());
  EXPECT_TRUE(ctx.deterministicCuDNN());
  EXPECT_TRUE(ctx.deterministicAlgorithms());
  ctx.setDeterministicAlgorithms(false, false);
  yolo::configure_cudnn(false);
}

// The progress line's GPU_mem column: the caching allocator's reserved memory; 0 on the CPU.
TEST(Device, ReservedGpuMemory) {
  EXPECT_EQ(yolo::cuda_memory_reserved_gb(torch::kCPU), 0.0);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Tensor t = torch::empty({64, 1024, 1024}, torch::kCUDA);  // 256 MiB
  EXPECT_GE(yolo::cuda_memory_reserved_gb(t.device()), 0.25);
}

TEST(Device, VersionReportNamesEveryComponent) {
  const std::string r = yolo::version_report();
  for (const char* s :
       {"yolo-cpp ", "LibTorch ", "CUDA: ", "cuDNN: ", "NCCL: ", "Gloo: ", "GPUs: ", "Threads: "}) {
    EXPECT_NE(r.find(s), std::string::npos) << s << " missing from\n" << r;
  }
  EXPECT_NE(r.find(yolo::cuda_compiled() ? "CUDA: compiled in, " : "CUDA: not compiled in"),
            std::string::npos)
      << r;
}

// Gloo can run several ranks on one GPU (NCCL cannot): ranks then take the GPUs in turn.
TEST(Device, GlooRanksShareGpusInTurn) {
  yolo::DeviceSelection one;
  one.cuda_ids = {0};
  EXPECT_EQ(yolo::rank_device(one, 1, 2, 1, /*share=*/true).device, c10::Device(c10::kCUDA, 0));
  yolo::DeviceSelection listed;
  listed.cuda_ids = {2, 3};
  listed.listed = true;
  EXPECT_EQ(yolo::rank_device(listed, 2, 4, 8, true).device, c10::Device(c10::kCUDA, 2));
  EXPECT_EQ(yolo::rank_device(listed, 3, 4, 8, true).device, c10::Device(c10::kCUDA, 3));
  EXPECT_THROW(yolo::rank_device(listed, 2, 4, 8, false), yolo::UsageError);
}

// CPU training: every core computes and batches load in the step; CUDA: loader threads as
// YOLOv5's; OMP_NUM_THREADS and a given --workers win.

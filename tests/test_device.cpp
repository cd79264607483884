#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "utils/device.h"
#include "utils/errors.h"

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

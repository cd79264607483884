#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/weights.h"
#include "models/yolo.h"
#include "utils/core/paths.h"

namespace fs = std::filesystem;
using yolo::DetectionModel;

namespace {
std::string cfg(const std::string& name) {
  return yolo::project_root() + "/configs/models/" + name + ".yaml";
}

class WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("yolo_weights_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool python_torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}
}  // namespace

TEST_F(WeightsTest, RoundTripGivesIdenticalOutputs) {
  torch::manual_seed(1);
  DetectionModel a = yolo::build_model(cfg("yolov5n"), 3);
  yolo::write_state_dict(yolo::state_dict(*a), path("w.pt"));
  torch::manual_seed(2);
  DetectionModel b = yolo::build_model(cfg("yolov5n"), 3);
  const auto report = yolo::load_weights(*b, path("w.pt"));
  EXPECT_EQ(report.transferred, 349);
  EXPECT_EQ(report.total, 349);
  EXPECT_EQ(report.mismatched, 0);
  a->eval();
  b->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({1, 3, 64, 64});
  EXPECT_TRUE(torch::equal(a->forward(x).pred, b->forward(x).pred));
}

TEST_F(WeightsTest, OtherClassCountSkipsMismatchedEntries) {
  DetectionModel a = yolo::build_model(cfg("yolov5n"), 80);
  yolo::write_state_dict(yolo::state_dict(*a), path("w80.pt"));
  DetectionModel b = yolo::build_model(cfg("yolov5n"), 3);
  const auto r = yolo::load_weights(*b, path("w80.pt"));
  EXPECT_EQ(r.mismatched, 6);  // Detect's three conv weights and biases
  EXPECT_EQ(r.transferred, 349 - 6);
  EXPECT_TRUE(torch::equal(a->model[0]->named_parameters()["conv.weight"],
                           b->model[0]->named_parameters()["conv.weight"]));
}

TEST_F(WeightsTest, AnotherArchitectureIsRefused) {
  DetectionModel s = yolo::build_model(cfg("yolov5s"));
  yolo::write_state_dict(yolo::state_dict(*s), path("s.pt"));
  DetectionModel n = yolo::build_model(cfg("yolov5n"));
  const std::string e = error_of([&] { yolo::load_weights(*n, path("s.pt")); });
  EXPECT_NE(e.find("another architecture"), std::string::npos) << e;
}

TEST_F(WeightsTest, BadFilesGiveClearErrors) {
  DetectionModel m = yolo::build_model(cfg("yolov5n"));
  std::string e = error_of([&] { yolo::read_state_dict(path("missing.pt")); });
  EXPECT_NE(e.find("missing.pt"), std::string::npos) << e;
  std::ofstream(path("text.pt")) << "not a checkpoint";
  e = error_of([&] { yolo::read_state_dict(path("text.pt")); });
  EXPECT_NE(e.find("not a zip"), std::string::npos) << e;
  yolo::write_state_dict(yolo::state_dict(*m), path("full.pt"));
  const auto size = fs::file_size(path("full.pt"));
  fs::copy_file(path("full.pt"), path("cut.pt"));
  fs::resize_file(path("cut.pt"), size / 2);
  e = error_of([&] { yolo::read_state_dict(path("cut.pt")); });
  EXPECT_NE(e.find("cut.pt"), std::string::npos) << e;
  // An empty file.
  std::ofstream(path("empty.pt")).close();
  e = error_of([&] { yolo::read_state_dict(path("empty.pt")); });
  EXPECT_NE(e.find("empty.pt"), std::string::npos) << e;
}

TEST_F(WeightsTest, ReadsCheckpointDictWithModelEntry) {
  DetectionModel m = yolo::build_model(cfg("yolov5n"), 2);
  c10::Dict<std::string, at::Tensor> sd;
  for (const auto& [k, v] : yolo::state_dict(*m)) sd.insert(k, v);
  c10::impl::GenericDict ckpt(c10::StringType::get(), c10::AnyType::get());
  ckpt.insert("epoch", 3);
  ckpt.insert("model", sd);
  const auto bytes = torch::pickle_save(c10::IValue(ckpt));
  std::ofstream(path("ckpt.pt"), std::ios::binary).write(bytes.data(), bytes.size());
  EXPECT_EQ(yolo::read_state_dict(path("ckpt.pt")).size(), 349u);
}

// Weights written here load in Python's torch.load, and a dict saved by Python loads here.
TEST_F(WeightsTest, InteroperatesWithPythonTorch) {
  if (!python_torch_available()) GTEST_SKIP() << "/usr/bin/python3 with torch not available";
  DetectionModel m = yolo::build_model(cfg("yolov5n"), 80);
  yolo::write_state_dict(yolo::state_dict(*m), path("cpp.pt"));
  const std::string script = path("check.py");
  std::ofstream(script)
      << "import sys, torch\n"
         "sd = torch.load(sys.argv[1])\n"
         "assert len(sd) == 349, len(sd)\n"
         "assert tuple(sd['model.0.conv.weight'].shape) == (16, 3, 6, 6)\n"
         "sd2 = {k: v + 1 if v.is_floating_point() else v for k, v in sd.items()}\n"
         "torch.save(sd2, sys.argv[2])\n";
  const std::string cmd =
      "/usr/bin/python3 '" + script + "' '" + path("cpp.pt") + "' '" + path("py.pt") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const auto back = yolo::read_state_dict(path("py.pt"));
  ASSERT_EQ(back.size(), 349u);
  const auto orig = yolo::state_dict(*m);
  EXPECT_TRUE(torch::allclose(back.at("model.24.m.2.bias"), orig.at("model.24.m.2.bias") + 1));
}

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "utils/core/io/checkpoint.h"
#include "utils/core/runtime/grad_scaler.h"
#include "utils/engine/ema.h"
#include "utils/engine/optim.h"

namespace fs = std::filesystem;

namespace {
// A miniature Conv+BN+head with YOLOv5-style names.
struct TinyImpl : torch::nn::Module {
  TinyImpl() {
    conv =
        register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    head = register_module("head", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 2, 1)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return head(torch::silu(bn(conv(x)))); }
  torch::nn::Conv2d conv{nullptr}, head{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(Tiny);

std::string tmp(const std::string& name) {
  return (fs::temp_directory_path() / ("yolo_tu_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void train_step(Tiny& m, torch::optim::Optimizer& opt) {
  opt.zero_grad();
  m->forward(torch::rand({2, 3, 8, 8})).pow(2).mean().backward();
  opt.step();
}
}  // namespace

TEST(Ema, DecayRampAndUpdateRule) {
  torch::manual_seed(0);
  Tiny model, copy;
  yolo::ModelEMA ema(copy.ptr(), *model);
  EXPECT_NEAR(ema.decay_at(1), 0.9999 * (1 - std::exp(-1.0 / 2000)), 1e-12);
  EXPECT_NEAR(ema.decay_at(100000), 0.9999, 1e-9);
  const torch::Tensor before = copy->head->weight.clone();
  EXPECT_TRUE(torch::equal(before, model->head->weight));  // initialised from the model
  {
    torch::NoGradGuard g;
    model->head->weight.add_(1.0);
  }
  ema.update(*model);
  const double d = ema.decay_at(1);
  EXPECT_TRUE(torch::allclose(copy->head->weight, before * d + (before + 1) * (1 - d), 1e-6, 1e-6));
  EXPECT_EQ(ema.updates(), 1);
  EXPECT_FALSE(copy->head->weight.requires_grad());
}

TEST(Optim, ParameterGroupsAsYolov5) {
  Tiny m;
  const auto g = yolo::split_param_groups(*m);
  EXPECT_EQ(g.bias_names, (std::vector<std::string>{"bn.bias", "head.bias"}));
  EXPECT_EQ(g.weight_names, (std::vector<std::string>{"conv.weight", "head.weight"}));
  EXPECT_EQ(g.bn_names, (std::vector<std::string>{"bn.weight"}));
  auto opt = yolo::make_optimizer("SGD", g, 0.01, 0.937, 5e-4);
  ASSERT_EQ(opt->param_groups().size(), 3u);
  auto& o0 = static_cast<torch::optim::SGDOptions&>(opt->param_groups()[0].options());
  auto& o1 = static_cast<torch::optim::SGDOptions&>(opt->param_groups()[1].options());
  auto& o2 = static_cast<torch::optim::SGDOptions&>(opt->param_groups()[2].options());
  EXPECT_TRUE(o0.nesterov());
  EXPECT_DOUBLE_EQ(o0.weight_decay(), 0.0);
  EXPECT_DOUBLE_EQ(o1.weight_decay(), 5e-4);
  EXPECT_DOUBLE_EQ(o2.weight_decay(), 0.0);
  EXPECT_DOUBLE_EQ(o1.momentum(), 0.937);
  yolo::set_group_momentum(*opt, 1, 0.8);
  yolo::set_group_lr(*opt, 0, 0.1);
  EXPECT_DOUBLE_EQ(yolo::group_momentum(*opt, 1), 0.8);
  EXPECT_DOUBLE_EQ(yolo::group_lr(*opt, 0), 0.1);
  auto adamw = yolo::make_optimizer("AdamW", g, 0.001, 0.9, 5e-4);
  EXPECT_DOUBLE_EQ(
      static_cast<torch::optim::AdamWOptions&>(adamw->param_groups()[0].options()).weight_decay(),
      0.0);
  EXPECT_DOUBLE_EQ(
      static_cast<torch::optim::AdamWOptions&>(adamw->param_groups()[1].options()).weight_decay(),
      5e-4);
  EXPECT_DOUBLE_EQ(yolo::group_momentum(*adamw, 2), 0.9);
  EXPECT_THROW(yolo::make_optimizer("Lion", g, 0.1, 0.9, 0), std::runtime_error);
}

TEST(Optim, SchedulesAndWarmupInterpolation) {
  const auto lin = yolo::lr_lambda(false, 10, 0.01);
  EXPECT_DOUBLE_EQ(lin(0), 1.0);
  EXPECT_NEAR(lin(5), 0.505, 1e-12);
  EXPECT_NEAR(lin(10), 0.01, 1e-12);
  const auto cos = yolo::lr_lambda(true, 10, 0.1);
  EXPECT_NEAR(cos(0), 1.0, 1e-12);
  EXPECT_NEAR(cos(5), 0.55, 1e-12);
  EXPECT_NEAR(cos(10), 0.1, 1e-12);
  // Warmup: bias lr falls from warmup_bias_lr, others rise from 0 over nw iterations.
  EXPECT_DOUBLE_EQ(yolo::interp2(0, 0, 100, 0.1, 0.01), 0.1);
  EXPECT_NEAR(yolo::interp2(50, 0, 100, 0.1, 0.01), 0.055, 1e-12);
  EXPECT_DOUBLE_EQ(yolo::interp2(150, 0, 100, 0.0, 0.01), 0.01);
}

TEST(Optim, StateRoundTripsThroughACheckpoint) {
  for (const std::string name : {"SGD", "Adam", "AdamW"}) {
    torch::manual_seed(3);
    Tiny m;
    auto opt = yolo::make_optimizer(name, yolo::split_param_groups(*m), 0.01, 0.9, 5e-4);
    train_step(m, *opt);
    train_step(m, *opt);
    yolo::Checkpoint c;
    c.epoch = 4;
    c.best_fitness = 0.25;
    for (const auto& kv : m->named_parameters()) c.model[kv.key()] = kv.value();
    c.optimizer = yolo::optimizer_state(*opt, name);
    c.ema_updates = 17;
    c.opt = "epochs: 5\n";
    c.hyp = "lr0: 0.01\n";
    const std::string path = tmp(name + ".pt");
    yolo::save_checkpoint(c, path);
    const yolo::Checkpoint r = yolo::load_checkpoint(path);
    EXPECT_EQ(r.epoch, 4);
    EXPECT_DOUBLE_EQ(r.best_fitness, 0.25);
    EXPECT_EQ(r.ema_updates, 17);
    EXPECT_EQ(r.opt, "epochs: 5\n");
    EXPECT_EQ(r.model.size(), m->named_parameters().size());
    ASSERT_TRUE(r.has_optimizer());
    // A fresh optimizer loaded with the state continues exactly like the original.
    Tiny m2;
    {
      torch::NoGradGuard g;
      for (const auto& kv : m2->named_parameters())
        kv.value().copy_(m->named_parameters()[kv.key()]);
      for (const auto& kv : m2->named_buffers()) kv.value().copy_(m->named_buffers()[kv.key()]);
    }
    auto opt2 = yolo::make_optimizer(name, yolo::split_param_groups(*m2), 0.5, 0.1, 5e-4);
    yolo::load_optimizer_state(*opt2, name, r.optimizer);
    EXPECT_DOUBLE_EQ(yolo::group_lr(*opt2, 1), 0.01);
    torch::manual_seed(9);
    train_step(m, *opt);
    torch::manual_seed(9);
    train_step(m2, *opt2);
    EXPECT_TRUE(torch::allclose(m->conv->weight, m2->conv->weight, 1e-6, 1e-7)) << name;
    // Stripping removes the optimizer and keeps the rest.
    yolo::strip_optimizer(path);
    const yolo::Checkpoint s = yolo::load_checkpoint(path);
    EXPECT_FALSE(s.has_optimizer());
    EXPECT_EQ(s.epoch, 4);
    EXPECT_THROW(yolo::load_optimizer_state(*opt2, name == "SGD" ? "Adam" : "SGD", r.optimizer),
                 c10::Error);
    fs::remove(path);
  }
}

// A checkpoint written where the parameters live elsewhere (a GPU; here also another dtype)
// holds its optimizer state on the CPU and resumes on a CPU-only machine: loading moves each
// tensor to its parameter's device and dtype.
TEST(Optim, StateIsSavedOnCpuAndLoadsOntoTheParametersDeviceAndDtype) {
  const torch::Device src = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  auto step = [](Tiny& m, torch::optim::Optimizer& opt) {
    const auto p = m->conv->weight;
    opt.zero_grad();
    torch::manual_seed(11);
    m->forward(torch::rand({2, 3, 8, 8}).to(p.device(), p.scalar_type())).pow(2).mean().backward();
    opt.step();
  };
  for (const std::string name : {"SGD", "Adam"}) {
    torch::manual_seed(3);
    Tiny m;
    m->to(src, torch::kDouble);
    auto opt = yolo::make_optimizer(name, yolo::split_param_groups(*m), 0.01, 0.9, 5e-4);
    step(m, *opt);
    yolo::Checkpoint c;
    c.optimizer = yolo::optimizer_state(*opt, name);
    for (const auto& kv : c.optimizer.toGenericDict().at("state").toGenericDict()) {
      for (const auto& t : kv.value().toGenericDict()) {
        if (t.value().isTensor()) {
          EXPECT_TRUE(t.value().toTensor().is_cpu()) << t.key();
        }
      }
    }
    const std::string path = tmp("portable_" + name + ".pt");
    yolo::save_checkpoint(c, path);
    Tiny m2;  // float32 on the CPU
    {
      torch::NoGradGuard g;
      for (const auto& kv : m2->named_parameters())
        kv.value().copy_(m->named_parameters()[kv.key()]);
    }
    auto opt2 = yolo::make_optimizer(name, yolo::split_param_groups(*m2), 0.01, 0.9, 5e-4);
    yolo::load_optimizer_state(*opt2, name, yolo::load_checkpoint(path).optimizer);
    const yolo::Checkpoint back = [&] {
      yolo::Checkpoint b;
      b.optimizer = yolo::optimizer_state(*opt2, name);
      return b;
    }();
    EXPECT_EQ(back.optimizer.toGenericDict().at("state").toGenericDict().size(),
              c.optimizer.toGenericDict().at("state").toGenericDict().size());
    step(m, *opt);
    step(m2, *opt2);
    const torch::Tensor a = m->conv->weight.to(torch::kCPU, torch::kFloat);
    EXPECT_TRUE(torch::allclose(a, m2->conv->weight, 1e-5, 1e-6)) << name;
    EXPECT_EQ(m2->conv->weight.scalar_type(), torch::kFloat);
    fs::remove(path);
  }
}

TEST(Checkpoint, BadFilesGiveClearErrors) {
  const std::string p = tmp("bad.pt");
  auto msg = [&] {
    try {
      yolo::load_checkpoint(p);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg().find("bad.pt"), std::string::npos);
  std::ofstream(p) << "hello";
  EXPECT_NE(msg().find("not a checkpoint"), std::string::npos);
  yolo::Checkpoint c;
  c.model["w"] = torch::ones({100, 100});
  yolo::save_checkpoint(c, p);
  fs::resize_file(p, fs::file_size(p) / 2);
  EXPECT_NE(msg().find("truncated"), std::string::npos) << msg();
  fs::remove(p);
}

TEST(GradScaler, DisabledPassesThrough) {
  yolo::GradScaler s(false);
  const at::Tensor loss = torch::full({}, 3.0);
  EXPECT_EQ(s.scale(loss).item<double>(), 3.0);
  at::Tensor p = torch::ones({2}).requires_grad_(true);
  p.mutable_grad() = torch::full({2}, std::numeric_limits<float>::infinity());
  s.unscale({p});
  EXPECT_TRUE(s.should_step());
}

TEST(GradScaler, UnscalesSkipsInfAndAdaptsTheScale) {
  yolo::GradScaler s(true, 1024.0, 2.0, 0.5, 2);
  at::Tensor p = torch::ones({3}).requires_grad_(true);
  s.scale((p * 0.5).sum()).backward();  // grad 0.5 * 1024
  EXPECT_TRUE(torch::allclose(p.grad(), torch::full({3}, 512.0)));
  s.unscale({p});
  EXPECT_TRUE(torch::allclose(p.grad(), torch::full({3}, 0.5)));
  EXPECT_TRUE(s.should_step());
  s.update();
  EXPECT_EQ(s.current_scale(), 1024.0);  // one good step of the 2 needed to grow
  p.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f});
  s.unscale({p});
  EXPECT_FALSE(s.should_step());
  s.update();
  EXPECT_EQ(s.current_scale(), 512.0);  // backed off, growth count reset
  p.mutable_grad() = torch::ones({3});
  for (int i = 0; i < 2; ++i) {
    s.unscale({p});
    s.update();
  }
  EXPECT_EQ(s.current_scale(), 1024.0);  // grew after 2 clean steps
}

TEST(Autocast, ScopeTurnsAutocastOnForItsDeviceAndRestoresTheState) {
  const torch::Tensor a = torch::rand({4, 4}), b = torch::rand({4, 4});
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  {
    yolo::AutocastScope outer(true, torch::kCPU);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    {
      yolo::AutocastScope off(false, torch::kCPU);  // disabled: changes nothing
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    }
    { yolo::AutocastScope inner(true, torch::kCPU); }
    EXPECT_TRUE(yolo::AutocastState::current().cpu) << "an inner scope turned the outer one off";
  }
  EXPECT_FALSE(yolo::AutocastState::current().cpu);
  EXPECT_FALSE(yolo::AutocastState::current().cuda);
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
}

TEST(Autocast, CudaScopeGivesFloat16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Tensor a = torch::rand({4, 4}, torch::kCUDA), b = torch::rand({4, 4}, torch::kCUDA);
  yolo::AutocastScope scope(true);
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kHalf);
}

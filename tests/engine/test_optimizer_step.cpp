// The training step's optimizer half: multi-tensor SGD/Adam/AdamW equal LibTorch's optimizers bit
// for bit on the CPU, MuSGD resumes from its saved state, clipping equals clip_grad_norm_, the
// fused kernels skip on AMP's found_inf, and one optimizer+EMA step of yolov5s dispatches a few
// dozen ATen ops, not thousands.
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/yolo.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/grad_scaler.h"
#include "utils/core/runtime/torch_compat.h"
#include "utils/engine/ema.h"
#include "utils/engine/optim.h"
#include "utils/engine/optimizer_step.h"

namespace {

using Kernel = yolo::OptimizerStep::Kernel;

// Parameters in YOLOv5's three groups (biases, decayed weights, BN weights) and one frozen.
struct Params {
  yolo::ParamGroups groups;
  std::vector<at::Tensor> all;
};

Params make_params(uint64_t seed) {
  torch::manual_seed(seed);
  Params p;
  auto add = [&](std::vector<at::Tensor>& g, std::vector<int64_t> shape) {
    at::Tensor t = torch::randn(shape).requires_grad_(true);
    g.push_back(t);
    p.all.push_back(t);
  };
  add(p.groups.bias, {7});
  add(p.groups.bias, {3});
  add(p.groups.weight, {4, 3, 3, 3});
  add(p.groups.weight, {5, 4});
  add(p.groups.bn, {4});
  at::Tensor frozen = torch::randn({6});  // no gradient: skipped by every optimizer
  p.groups.weight.push_back(frozen);
  p.all.push_back(frozen);
  return p;
}

void set_grads(const Params& p, int step) {
  torch::manual_seed(1000 + step);
  for (const auto& t : p.all) {
    if (t.requires_grad()) t.mutable_grad() = torch::randn_like(t) * 3;
  }
}

// Used by the fused-kernel tests only (not built against LibTorch 1.13).
[[maybe_unused]] std::vector<at::Tensor> snapshot(const Params& p) {
  std::vector<at::Tensor> out;
  for (const auto& t : p.all) out.push_back(t.detach().clone());
  return out;
}

void expect_identical(const Params& a, const Params& b, const std::string& what) {
  for (size_t i = 0; i < a.all.size(); ++i) {
    EXPECT_TRUE(torch::equal(a.all[i], b.all[i])) << what << ": parameter " << i;
  }
}

std::unique_ptr<torch::optim::Optimizer> make(const std::string& name, const Params& p) {
  auto opt = yolo::make_optimizer(name, p.groups, 0.01, 0.9, 5e-4);
  yolo::set_group_lr(*opt, 0, 0.1);  // as warmup: the bias group at another rate
  return opt;
}

class SameAsLibTorch : public ::testing::TestWithParam<std::string> {};

TEST_P(SameAsLibTorch, ForeachStepsEqualTheOptimizersStepBitForBit) {
  const std::string name = GetParam();
  Params ref = make_params(1), ours = make_params(1);
  auto ref_opt = make(name, ref), our_opt = make(name, ours);
  yolo::OptimizerStep step(*our_opt, name, Kernel::kForeach);
  for (int s = 0; s < 4; ++s) {
    set_grads(ref, s);
    set_grads(ours, s);
    if (s == 2) {  // warmup changes lr and momentum between steps
      yolo::set_group_momentum(*ref_opt, 1, 0.95);
      yolo::set_group_momentum(*our_opt, 1, 0.95);
    }
    {
      torch::NoGradGuard no_grad;
      ref_opt->step();
    }
    step.step();
    expect_identical(ref, ours, name + " step " + std::to_string(s));
  }
  // The state a checkpoint saves is the optimizer's own: equal too.
  const auto a = yolo::optimizer_state(*ref_opt, name), b = yolo::optimizer_state(*our_opt, name);
  EXPECT_EQ(a.toGenericDict().at("state").toGenericDict().size(),
            b.toGenericDict().at("state").toGenericDict().size());
}

INSTANTIATE_TEST_SUITE_P(Optimizers, SameAsLibTorch, ::testing::Values("SGD", "Adam", "AdamW"));

// MuSGD: a run stopped after two steps and resumed from its saved state (both momentum buffers)
// ends where the uninterrupted run does; the bias and BatchNorm groups take SGD's steps exactly
// and the weights' Muon step moves them beyond SGD's.
TEST(MuSGD, ResumesFromItsStateAndStepsOnlyTheWeightsWithMuon) {
  Params full = make_params(1), resumed = make_params(1), sgd = make_params(1);
  auto full_opt = make("MuSGD", full), sgd_opt = make("SGD", sgd);
  yolo::OptimizerStep full_step(*full_opt, "MuSGD", Kernel::kForeach);
  yolo::OptimizerStep sgd_step(*sgd_opt, "SGD", Kernel::kForeach);
  EXPECT_EQ(full_step.kernel(), Kernel::kForeach);
  for (int s = 0; s < 2; ++s) {
    set_grads(full, s);
    set_grads(sgd, s);
    full_step.step();
    sgd_step.step();
  }
  for (const auto* group : {&full.groups.bias, &full.groups.bn}) {
    for (size_t i = 0; i < group->size(); ++i) {
      const auto& twin = group == &full.groups.bias ? sgd.groups.bias[i] : sgd.groups.bn[i];
      EXPECT_TRUE(torch::equal((*group)[i], twin)) << "a bias or BatchNorm weight";
    }
  }
  EXPECT_FALSE(torch::allclose(full.groups.weight[0], sgd.groups.weight[0]));
  const c10::IValue saved = yolo::optimizer_state(*full_opt, "MuSGD");
  for (size_t i = 0; i < full.all.size(); ++i) {
    torch::NoGradGuard no_grad;
    resumed.all[i].copy_(full.all[i]);
  }
  auto resumed_opt = make("MuSGD", resumed);
  yolo::load_optimizer_state(*resumed_opt, "MuSGD", saved);
  yolo::OptimizerStep resumed_step(*resumed_opt, "MuSGD", Kernel::kForeach);
  for (int s = 2; s < 4; ++s) {
    set_grads(full, s);
    set_grads(resumed, s);
    full_step.step();
    resumed_step.step();
  }
  expect_identical(full, resumed, "MuSGD resumed");
  EXPECT_THROW(yolo::load_optimizer_state(*make("SGD", sgd), "SGD", saved), c10::Error);
}

// MuSGD under AMP skips a step with inf/NaN gradients on the device (found_inf = 1): parameters
// and both momentum buffers stay as they were, nothing is read back to the host, and with
// found_inf = 0 every step is bit for bit the step without it.
TEST(MuSGD, SkipsAnInfStepOnTheDeviceAndStepsAsWithoutOtherwise) {
  Params ours = make_params(1), ref = make_params(1);
  auto our_opt = make("MuSGD", ours), ref_opt = make("MuSGD", ref);
  yolo::OptimizerStep our_step(*our_opt, "MuSGD", Kernel::kForeach);
  yolo::OptimizerStep ref_step(*ref_opt, "MuSGD", Kernel::kForeach);
  const at::Tensor no_inf = torch::zeros({}), inf = torch::ones({});
  for (int s = 0; s < 5; ++s) {
    set_grads(ours, s);
    set_grads(ref, s);
    if (s == 2) {  // an overflowed step: ours skips it, the reference never takes it
      ours.all[2].mutable_grad()[0][0][0][0] = std::numeric_limits<float>::infinity();
      ours.all[3].mutable_grad()[1][1] = std::numeric_limits<float>::quiet_NaN();
      const std::vector<at::Tensor> before = snapshot(ours);
      int reads = 0;
      static thread_local int* seen = nullptr;
      seen = &reads;
      const auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
          [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
            if (std::string(fn.name()) == "aten::_local_scalar_dense") ++*seen;
            return nullptr;
          }));
      our_step.step(inf);
      at::removeCallback(handle);
      EXPECT_EQ(reads, 0) << "the skip was decided on the host";
      for (size_t i = 0; i < before.size(); ++i) {
        EXPECT_TRUE(torch::equal(before[i], ours.all[i]))
            << "the skipped step moved parameter " << i;
      }
      continue;
    }
    our_step.step(no_inf);
    ref_step.step();
    expect_identical(ours, ref, "MuSGD step " + std::to_string(s));
  }
  const auto a = yolo::optimizer_state(*our_opt, "MuSGD").toGenericDict().at("state");
  const auto b = yolo::optimizer_state(*ref_opt, "MuSGD").toGenericDict().at("state");
  EXPECT_EQ(a.toGenericDict().size(), b.toGenericDict().size());
}

TEST(ClipGradNorm, EqualsLibTorchsClipAndStaysOnTheDevice) {
  for (double scale : {0.01, 100.0}) {  // below and above the limit
    Params a = make_params(2), b = make_params(2);
    set_grads(a, 0);
    set_grads(b, 0);
    for (auto& t : a.all) {
      if (t.grad().defined()) t.mutable_grad().mul_(scale);
    }
    for (auto& t : b.all) {
      if (t.grad().defined()) t.mutable_grad().mul_(scale);
    }
    const double ref = torch::nn::utils::clip_grad_norm_(a.all, 10.0);
    const at::Tensor ours = yolo::clip_grad_norm(b.all, 10.0);
    EXPECT_EQ(ours.dim(), 0);
    EXPECT_EQ(ours.item<double>(), ref);
    for (size_t i = 0; i < a.all.size(); ++i) {
      if (!a.all[i].grad().defined()) continue;
      EXPECT_TRUE(torch::equal(a.all[i].grad(), b.all[i].grad())) << "scale " << scale;
    }
  }
}

TEST(Ema, MultiTensorUpdateEqualsThePerTensorRule) {
  torch::manual_seed(3);
  torch::nn::Sequential model(torch::nn::Conv2d(3, 4, 3), torch::nn::BatchNorm2d(4));
  torch::nn::Sequential copy(torch::nn::Conv2d(3, 4, 3), torch::nn::BatchNorm2d(4));
  yolo::ModelEMA ema(copy.ptr(), *model);
  std::vector<at::Tensor> ref;
  for (const auto& t : copy->parameters()) ref.push_back(t.detach().clone());
  for (const auto& t : copy->buffers()) ref.push_back(t.detach().clone());
  for (int s = 1; s <= 3; ++s) {
    {
      torch::NoGradGuard g;
      for (auto& t : model->parameters()) t.add_(torch::randn_like(t));
      model->forward(torch::randn({2, 3, 8, 8}));  // moves the BN statistics
    }
    ema.update(*model);
    const double d = ema.decay_at(s);
    size_t k = 0;
    std::vector<at::Tensor> src = model->parameters();
    for (const auto& t : model->buffers()) src.push_back(t);
    for (auto& r : ref) {
      if (r.is_floating_point()) r.mul_(d).add_(src[k], 1 - d);
      ++k;
    }
    std::vector<at::Tensor> got = copy->parameters();
    for (const auto& t : copy->buffers()) got.push_back(t);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(torch::equal(got[i], ref[i])) << "tensor " << i << " after update " << s;
    }
  }
}

#ifdef YOLO_HAS_FUSED_OPTIMIZERS
// The GPU's kernels, run here through their CPU implementations: the same updates within
// rounding, and a found_inf of 1 leaves parameters and state untouched.
class FusedKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedKernels, MatchForeachAndSkipOnFoundInf) {
  const std::string name = GetParam();
  Params fe = make_params(4), fu = make_params(4);
  auto fe_opt = make(name, fe), fu_opt = make(name, fu);
  yolo::OptimizerStep foreach_step(*fe_opt, name, Kernel::kForeach);
  yolo::OptimizerStep fused_step(*fu_opt, name, Kernel::kFused);
  const at::Tensor clean = torch::zeros({}), inf = torch::ones({});
  for (int s = 0; s < 3; ++s) {
    set_grads(fe, s);
    set_grads(fu, s);
    foreach_step.step();
    fused_step.step(clean);
    for (size_t i = 0; i < fe.all.size(); ++i) {
      EXPECT_TRUE(torch::allclose(fe.all[i], fu.all[i], 1e-5, 1e-6)) << name << " " << i;
    }
  }
  const std::vector<at::Tensor> before = snapshot(fu);
  set_grads(fu, 9);
  fused_step.step(inf);  // skipped on the device
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], fu.all[i]));
  // The next clean step continues as if the skipped one never happened.
  set_grads(fe, 3);
  set_grads(fu, 3);
  foreach_step.step();
  fused_step.step(clean);
  for (size_t i = 0; i < fe.all.size(); ++i) {
    EXPECT_TRUE(torch::allclose(fe.all[i], fu.all[i], 1e-5, 1e-6)) << name << " after skip " << i;
  }
  fused_step.sync_state();  // Adam's step counts: the skipped step is not one
  const auto a = yolo::optimizer_state(*fe_opt, name), b = yolo::optimizer_state(*fu_opt, name);
  if (name != "SGD") {
    const auto sa = a.toGenericDict().at("state").toGenericDict();
    const auto sb = b.toGenericDict().at("state").toGenericDict();
    EXPECT_EQ(sa.at(0).toGenericDict().at("step").toInt(),
              sb.at(0).toGenericDict().at("step").toInt());
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, FusedKernels, ::testing::Values("SGD", "Adam", "AdamW"));
#endif

// Counts the ATen ops the calling thread dispatches at the top level (ops they call inside are
// the op's own business: on a GPU one top-level foreach op is one or a few kernel launches).
std::atomic<int> g_top_ops{0};
thread_local int t_depth = 0;

std::vector<std::string>* g_names = nullptr;

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (t_depth++ == 0) {
    ++g_top_ops;
    if (g_names) g_names->push_back(fn.name());
  }
  return nullptr;
}
void on_exit(const at::RecordFunction&, at::ObserverContext*) { --t_depth; }

int count_top_level_ops(const std::function<void()>& fn) {
  g_top_ops = 0;
  t_depth = 0;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_enter, on_exit).scopes({at::RecordScope::FUNCTION}));
  fn();
  at::removeCallback(handle);
  return g_top_ops.load();
}

TEST(OptimizerStep, OneYolov5sStepDispatchesDozensOfOpsNotThousands) {
#ifndef YOLO_HAS_FUSED_OPTIMIZERS
  GTEST_SKIP() << "LibTorch 1.13 (a CPU-only build here) runs the multi-tensor ops per tensor";
#endif
  const std::string cfg = yolo::project_root() + "/configs/models/yolov5s.yaml";
  yolo::DetectionModel model = yolo::build_model(cfg, 80), ema_model = yolo::build_model(cfg, 80);
  yolo::ModelEMA ema(ema_model.ptr(), *model);
  const yolo::ParamGroups groups = yolo::split_param_groups(*model);
  auto opt = yolo::make_optimizer("SGD", groups, 0.01, 0.937, 5e-4);
  // As on a GPU: AMP's scaler and the fused kernel, which takes found_inf without a host read.
#ifdef YOLO_HAS_FUSED_OPTIMIZERS
  yolo::OptimizerStep step(*opt, "SGD", Kernel::kFused);
#else
  yolo::OptimizerStep step(*opt, "SGD", Kernel::kForeach);
#endif
  yolo::GradScaler scaler(true);
  const std::vector<at::Tensor> params = model->parameters();
  auto one_step = [&] {
    scaler.unscale(params);
    yolo::clip_grad_norm(params, 10.0);
    step.step(step.kernel() == Kernel::kFused ? std::optional<at::Tensor>(scaler.found_inf())
                                              : std::nullopt);
    scaler.update();
    step.zero_grad();
    ema.update(*model);
  };
  auto grads = [&] {
    torch::NoGradGuard g;
    for (const auto& p : params) p.mutable_grad() = torch::full_like(p, 1e-3);
  };
  grads();
  one_step();  // the first step makes the momentum buffers
  grads();
  std::vector<std::string> names;
  g_names = &names;
  const int ops = count_top_level_ops(one_step);
  g_names = nullptr;
  std::map<std::string, int> by_name;
  for (const auto& n : names) ++by_name[n];
  for (const auto& [n, c] : by_name) std::printf("  %s x%d\n", n.c_str(), c);
  EXPECT_EQ(by_name.count("aten::item"), 0u) << "a host read in the step";
  EXPECT_EQ(by_name.count("aten::_local_scalar_dense"), 0u) << "a host read in the step";
  // The per-parameter loop this replaced: unscale, clip, SGD and EMA each touched every tensor.
  grads();
  const int per_tensor = count_top_level_ops([&] {
    torch::NoGradGuard g;
    for (const auto& p : params) p.grad().mul_(1.0).isfinite();
    for (const auto& p : params) p.grad().norm(2);
    for (const auto& p : params) p.add_(p.grad(), -0.01);
  });
  std::printf(
      "yolov5s optimizer+EMA+scaler step: %d top-level ATen ops (%zu parameters; a "
      "per-tensor unscale, norm and update alone: %d)\n",
      ops, params.size(), per_tensor);
  EXPECT_GT(ops, 0);
  EXPECT_LE(ops, 40);
  EXPECT_GT(per_tensor, 2 * static_cast<int>(params.size()));  // the counter sees per-tensor work
}

}  // namespace

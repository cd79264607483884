#pragma once
// YOLOv5 v7.0's optimizer set-up (smart_optimizer): three parameter groups in this order —
// 0: biases (no decay), 1: other weights (decay), 2: BatchNorm weights (no decay) — for SGD
// (nesterov), Adam or AdamW, plus warmup interpolation, LR schedules and the optimizer state as
// a PyTorch-style dict for checkpoints.
#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace yolo {

struct ParamGroups {
  std::vector<torch::Tensor> bias, weight, bn;
  std::vector<std::string> bias_names, weight_names, bn_names;
};

// Classifies by name as YOLOv5 does by module type: "*.bias" -> bias, "*bn.weight" -> BN weight,
// anything else -> decayed weight.
ParamGroups split_param_groups(const torch::nn::Module& model);

// name: SGD, Adam or AdamW. `momentum` is SGD's momentum or Adam's beta1.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                        const ParamGroups& groups, double lr,
                                                        double momentum, double weight_decay);

double group_lr(const torch::optim::Optimizer& opt, size_t group);
void set_group_lr(torch::optim::Optimizer& opt, size_t group, double lr);
// SGD momentum or Adam beta1.
void set_group_momentum(torch::optim::Optimizer& opt, size_t group, double momentum);
double group_momentum(const torch::optim::Optimizer& opt, size_t group);

// LR factor by epoch: linear (1 - x/epochs) * (1 - lrf) + lrf, or YOLOv5's one_cycle cosine.
std::function<double(double)> lr_lambda(bool cos_lr, int epochs, double lrf);

// numpy.interp(x, [x0, x1], [y0, y1]) clamped at the ends.
double interp2(double x, double x0, double x1, double y0, double y1);

// {"state": {index: {...tensors...}}, "param_groups": [{"lr", "momentum", "params", ...}]}, its
// tensors the optimizer's own (no copy, so a GPU step is not waited for); checkpoints copy them to
// the host when they are taken, so a checkpoint written on a GPU resumes on a machine without one.
c10::IValue optimizer_state(const torch::optim::Optimizer& opt, const std::string& name);
// Restores what optimizer_state wrote into an optimizer built the same way, moving each tensor to
// its parameter's device and dtype; throws on mismatch.
void load_optimizer_state(torch::optim::Optimizer& opt, const std::string& name,
                          const c10::IValue& state);

}  // namespace yolo

#pragma once
// YOLOv5 v7.0's optimizer set-up (smart_optimizer): three parameter groups in this order —
// 0: biases (no decay), 1: other weights (decay), 2: BatchNorm weights (no decay) — for SGD
// (nesterov), Adam or AdamW, and Ultralytics' MuSGD (utils/engine/musgd.h), whose groups 3-5 hold
// the same kinds of the classification branches at 3x the lr; plus warmup interpolation, LR
// schedules and the optimizer state as a PyTorch-style dict for checkpoints.
#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace yolo {

class DetectionModelImpl;

struct ParamGroups {
  std::vector<torch::Tensor> bias, weight, bn;
  std::vector<std::string> bias_names, weight_names, bn_names;
};

// Classifies by name as YOLOv5 does by module type: "*.bias" -> bias, "*bn.weight" -> BN weight,
// anything else -> decayed weight.
ParamGroups split_param_groups(const torch::nn::Module& model);

// Moves the parameters whose names start with one of `prefixes` out of g, into the result.
ParamGroups take_params(ParamGroups& g, const std::vector<std::string>& prefixes);
// MuSGD's boosted parameters: the Detect head's classification branches (cv3, one2one_cv3),
// moved out of g.
ParamGroups take_classification_branches(ParamGroups& g, const DetectionModelImpl& model);

// name: SGD, Adam, AdamW or MuSGD. `momentum` is SGD's momentum or Adam's beta1. `boosted`: MuSGD's
// classification-branch parameters (groups 3-5, at 3x lr), empty for the others.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                        const ParamGroups& groups, double lr,
                                                        double momentum, double weight_decay,
                                                        const ParamGroups& boosted = {});

// The optimizer for `model` as training builds it: split_param_groups, and for MuSGD the head's
// classification branches moved to groups 3-5 (Ultralytics' 3x lr); the groups are kept for the
// log.
struct ModelOptimizer {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  ParamGroups groups, boosted;
};
ModelOptimizer make_model_optimizer(const std::string& name, const DetectionModelImpl& model,
                                    double lr, double momentum, double weight_decay);

// Group g's kind (0 bias, 1 weight, 2 BatchNorm) and its lr relative to lr0 (3 for MuSGD's
// groups 3-5).
inline size_t group_kind(size_t g) { return g % 3; }
inline double group_lr_factor(size_t g) { return g < 3 ? 1.0 : 3.0; }

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
// The optimizer name optimizer_state recorded ("" when the value holds none).
std::string optimizer_state_type(const c10::IValue& v);
// Restores what optimizer_state wrote into an optimizer built the same way, moving each tensor to
// its parameter's device and dtype; throws on mismatch.
void load_optimizer_state(torch::optim::Optimizer& opt, const std::string& name,
                          const c10::IValue& state);

}  // namespace yolo

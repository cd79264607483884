#include "utils/engine/ema.h"

#include <torch/torch.h>

#include <cmath>

namespace yolo {

ModelEMA::ModelEMA(std::shared_ptr<torch::nn::Module> ema, const torch::nn::Module& model,
                   int64_t updates, double decay, double tau)
    : ema_(std::move(ema)), updates_(updates), decay_(decay), tau_(tau) {
  torch::NoGradGuard no_grad;
  for (auto& [e, m] : pairs(model)) e.copy_(m);
  for (auto& p : ema_->parameters()) p.set_requires_grad(false);
  ema_->eval();
}

double ModelEMA::decay_at(int64_t updates) const {
  return decay_ * (1 - std::exp(-static_cast<double>(updates) / tau_));
}

std::vector<std::pair<torch::Tensor, torch::Tensor>> ModelEMA::pairs(
    const torch::nn::Module& model) const {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> out;
  const auto mp = model.named_parameters(), ep = ema_->named_parameters();
  const auto mb = model.named_buffers(), eb = ema_->named_buffers();
  TORCH_CHECK(mp.size() == ep.size() && mb.size() == eb.size(),
              "ModelEMA: the EMA copy and the model differ in architecture");
  for (const auto& kv : ep) out.emplace_back(kv.value(), mp[kv.key()]);
  for (const auto& kv : eb) out.emplace_back(kv.value(), mb[kv.key()]);
  return out;
}

void ModelEMA::update(const torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  if (cached_for_ != &model) {  // name lookups once per model, not per step
    ema_float_.clear();
    model_float_.clear();
    for (auto& [e, m] : pairs(model)) {
      if (!e.is_floating_point()) continue;  // as YOLOv5: BatchNorm's counters are not averaged
      ema_float_.push_back(e);
      model_float_.push_back(m.detach());
    }
    cached_for_ = &model;
  }
  ++updates_;
  const double d = decay_at(updates_);
  at::_foreach_mul_(ema_float_, d);
  at::_foreach_add_(ema_float_, model_float_, 1 - d);
}

}  // namespace yolo

#pragma once
// YOLOv5's ModelEMA: an exponential moving average of a model's floating-point state (parameters
// and BatchNorm statistics), with a decay that ramps up over the first updates:
// d = 0.9999 * (1 - exp(-updates / 2000)). The EMA copy is what is validated and saved.
#include <torch/nn/module.h>

#include <memory>
#include <utility>
#include <vector>

namespace yolo {

class ModelEMA {
 public:
  // `ema` is a separate instance of the same architecture; it is initialised from `model`.
  ModelEMA(std::shared_ptr<torch::nn::Module> ema, const torch::nn::Module& model,
           int64_t updates = 0, double decay = 0.9999, double tau = 2000);

  // v = d * v + (1 - d) * m for every floating-point tensor, as two multi-tensor kernels (the
  // same math as YOLOv5's per-tensor `v *= d; v += (1 - d) * m`, bit for bit on the CPU).
  void update(const torch::nn::Module& model);
  double decay_at(int64_t updates) const;
  int64_t updates() const { return updates_; }
  void set_updates(int64_t u) { updates_ = u; }
  std::shared_ptr<torch::nn::Module> module() const { return ema_; }

 private:
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs(const torch::nn::Module& model) const;
  std::shared_ptr<torch::nn::Module> ema_;
  // The floating-point pairs as two lists, for the multi-tensor update.
  std::vector<torch::Tensor> ema_float_, model_float_;
  const torch::nn::Module* cached_for_ = nullptr;
  int64_t updates_;
  double decay_, tau_;
};

}  // namespace yolo

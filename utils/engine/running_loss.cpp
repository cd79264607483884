#include "utils/engine/running_loss.h"

#include <torch/torch.h>

#include <limits>

namespace yolo {

RunningLoss::RunningLoss(const c10::Device& device)
    : state_(torch::zeros({5}, torch::TensorOptions(torch::kFloat32).device(device))),
      mean_(torch::zeros({3})) {}

void RunningLoss::start_epoch() {
  state_.slice(0, 0, 4).zero_();
  mean_ = torch::zeros({3});
  finite_ = 0;
}

void RunningLoss::add(const at::Tensor& items) {
  torch::NoGradGuard no_grad;
  const at::Tensor x = items.detach().to(state_.dtype());
  const at::Tensor finite = x.isfinite().all();
  at::Tensor mean = state_.slice(0, 0, 3), n = state_.select(0, 3), run = state_.select(0, 4);
  // (mean * n + x) / (n + 1): bit for bit the running mean over every step when all are finite.
  mean.copy_(torch::where(finite, (mean * n + x) / (n + 1), mean));
  const at::Tensor f = finite.to(state_.dtype());
  n.add_(f);
  run.add_(1).mul_(1 - f);
}

void RunningLoss::read() {
  const at::Tensor host = state_.cpu();
  mean_ = host.slice(0, 0, 3).clone();
  const float* s = host.data_ptr<float>();
  finite_ = static_cast<int64_t>(s[3]);
  run_ = static_cast<int64_t>(s[4]);
}

double RunningLoss::epoch_mean(int k) const {
  if (finite_ == 0) return std::numeric_limits<double>::quiet_NaN();
  return mean_[k].item<double>();
}

}  // namespace yolo

#include "utils/eval/end2end_loss.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace yolo {

namespace {

constexpr double kFirstOne2Many = 0.8, kLastOne2Many = 0.1;

TalOptions assigner(int topk, int topk2) {
  TalOptions o;
  o.topk = topk;
  o.topk2 = topk2;
  return o;
}

}  // namespace

End2EndLoss::End2EndLoss(const AnchorFreeGains& gains, int nc, int reg_max,
                         const std::vector<float>& strides)
    : one2many_(gains, nc, reg_max, strides, assigner(10, 0)),
      one2one_(gains, nc, reg_max, strides, assigner(7, 1)),
      levels_(strides.size()) {}

void End2EndLoss::set_epoch(int epoch, int epochs) {
  const double progress = std::max(1.0 - static_cast<double>(epoch) / std::max(epochs - 1, 1), 0.0);
  o2m_ = progress * (kFirstOne2Many - kLastOne2Many) + kLastOne2Many;
}

std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> End2EndLoss::split(
    const std::vector<at::Tensor>& p) const {
  if (p.size() != 2 * levels_) {
    throw std::invalid_argument("the end-to-end loss needs both heads' maps (" +
                                std::to_string(2 * levels_) + "), got " + std::to_string(p.size()));
  }
  return {{p.begin(), p.begin() + levels_}, {p.begin() + levels_, p.end()}};
}

LossResult End2EndLoss::operator()(const std::vector<at::Tensor>& p,
                                   const at::Tensor& targets) const {
  const auto [o2m_maps, o2o_maps] = split(p);
  // One table for both branches: one host pass and one copy to the device per step.
  const at::Tensor prepared = one2many_.prepare_targets(targets, p[0].size(0), p[0].device());
  const LossResult o2m = one2many_.with_prepared(o2m_maps, prepared);
  const LossResult o2o = one2one_.with_prepared(o2o_maps, prepared);
  LossResult r;
  r.loss = o2m.loss * o2m_ + o2o.loss * std::max(1.0 - o2m_, 0.0);
  r.items = o2o.items;
  return r;
}

}  // namespace yolo

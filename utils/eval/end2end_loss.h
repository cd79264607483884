#pragma once
// Ultralytics' E2ELoss (YOLO26): the one-to-many branch is assigned as YOLOv8's (top 10 anchors
// per box), the one-to-one branch keeps one anchor per box (top 7, then the best 1), so its top-k
// output needs no NMS. Both use the anchor-free loss with L1 distances (reg_max 1); the total
// moves weight from the one-to-many to the one-to-one branch over training: o2m from 0.8 after
// no epoch down linearly to 0.1 after the last, o2o = 1 - o2m. The items are the one-to-one
// branch's, as Ultralytics prints and writes them.
#include <vector>

#include "utils/eval/anchor_free_loss.h"

namespace yolo {

class End2EndLoss : public DetectionLoss {
 public:
  End2EndLoss(const AnchorFreeGains& gains, int nc, int reg_max, const std::vector<float>& strides);

  // p: the one-to-many head's levels, then the one-to-one head's (what the end-to-end head
  // returns with both heads on); targets as AnchorFreeLoss.
  LossResult operator()(const std::vector<at::Tensor>& p, const at::Tensor& targets) const override;
  void set_epoch(int epoch, int epochs) override;

  double one2many_weight() const { return o2m_; }
  const AnchorFreeLoss& one2many() const { return one2many_; }
  const AnchorFreeLoss& one2one() const { return one2one_; }
  // The two heads' halves of p (checked: 2 x levels maps).
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> split(
      const std::vector<at::Tensor>& p) const;

 private:
  AnchorFreeLoss one2many_, one2one_;
  size_t levels_;
  double o2m_ = 0.8;
};

}  // namespace yolo

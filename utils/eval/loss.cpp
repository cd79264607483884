#include "utils/eval/loss.h"

#include <torch/torch.h>

#include <cmath>

namespace yolo {

at::Tensor bbox_ciou(const at::Tensor& box1, const at::Tensor& box2, double eps) {
  const at::Tensor x1 = box1.select(1, 0), y1 = box1.select(1, 1);
  const at::Tensor w1 = box1.select(1, 2), h1 = box1.select(1, 3);
  const at::Tensor x2 = box2.select(1, 0), y2 = box2.select(1, 1);
  const at::Tensor w2 = box2.select(1, 2), h2 = box2.select(1, 3);
  const at::Tensor b1x1 = x1 - w1 / 2, b1x2 = x1 + w1 / 2, b1y1 = y1 - h1 / 2, b1y2 = y1 + h1 / 2;
  const at::Tensor b2x1 = x2 - w2 / 2, b2x2 = x2 + w2 / 2, b2y1 = y2 - h2 / 2, b2y2 = y2 + h2 / 2;
  const at::Tensor inter = (torch::min(b1x2, b2x2) - torch::max(b1x1, b2x1)).clamp_min(0) *
                           (torch::min(b1y2, b2y2) - torch::max(b1y1, b2y1)).clamp_min(0);
  const at::Tensor uni = w1 * h1 + w2 * h2 - inter + eps;
  const at::Tensor iou = inter / uni;
  const at::Tensor cw = torch::max(b1x2, b2x2) - torch::min(b1x1, b2x1);
  const at::Tensor ch = torch::max(b1y2, b2y2) - torch::min(b1y1, b2y1);
  const at::Tensor c2 = cw.pow(2) + ch.pow(2) + eps;
  const at::Tensor rho2 =
      ((b2x1 + b2x2 - b1x1 - b1x2).pow(2) + (b2y1 + b2y2 - b1y1 - b1y2).pow(2)) / 4;
  const at::Tensor v = (4 / (M_PI * M_PI)) * (torch::atan(w2 / h2) - torch::atan(w1 / h1)).pow(2);
  at::Tensor alpha;
  {
    torch::NoGradGuard no_grad;
    alpha = v / (v - iou + (1 + eps));
  }
  return iou - (rho2 / c2 + v * alpha);
}

ComputeLoss::ComputeLoss(const LossGains& gains, int nc, const at::Tensor& anchors)
    : g_(gains),
      nc_(nc),
      nl_(static_cast<int>(anchors.size(0))),
      na_(static_cast<int>(anchors.size(1))),
      anchors_(anchors.detach().clone()) {
  balance_ = nl_ == 3 ? std::vector<double>{4.0, 1.0, 0.4}
                      : std::vector<double>{4.0, 1.0, 0.25, 0.06, 0.02};
  TORCH_CHECK(nl_ <= static_cast<int>(balance_.size()), "ComputeLoss: at most 5 levels");
}

at::Tensor ComputeLoss::bce_terms(const at::Tensor& logits, const at::Tensor& target,
                                  double pos_weight) const {
  const at::Tensor pw = torch::full({1}, pos_weight, logits.options());
  at::Tensor loss =
      torch::binary_cross_entropy_with_logits(logits, target, {}, pw, at::Reduction::None);
  if (g_.fl_gamma <= 0) return loss;
  // FocalLoss(gamma, alpha=0.25) around the BCE, as YOLOv5's utils/loss.py.
  const at::Tensor prob = logits.sigmoid();
  const at::Tensor p_t = target * prob + (1 - target) * (1 - prob);
  const double alpha = 0.25;
  const at::Tensor alpha_factor = target * alpha + (1 - target) * (1 - alpha);
  return loss * alpha_factor * (1.0 - p_t).pow(g_.fl_gamma);
}

at::Tensor ComputeLoss::bce(const at::Tensor& logits, const at::Tensor& target,
                            double pos_weight) const {
  if (g_.fl_gamma <= 0) {
    const at::Tensor pw = torch::full({1}, pos_weight, logits.options());
    return torch::binary_cross_entropy_with_logits(logits, target, {}, pw, at::Reduction::Mean);
  }
  return bce_terms(logits, target, pos_weight).mean();
}

LossTargets ComputeLoss::build_targets(const std::vector<at::Tensor>& p,
                                       const at::Tensor& targets_in) const {
  LossTargets out;
  const auto dev = targets_in.device();
  const auto fopt = torch::TensorOptions().dtype(torch::kFloat).device(dev);
  const at::Tensor anchors_all = anchors_.to(dev);
  const int64_t nt = targets_in.size(0);
  at::Tensor gain = torch::ones({7}, fopt);
  const at::Tensor ai = torch::arange(na_, fopt).view({na_, 1}).repeat({1, nt});
  // (na, nt, 7): image, class, x, y, w, h, anchor
  const at::Tensor targets =
      torch::cat({targets_in.to(torch::kFloat).repeat({na_, 1, 1}), ai.unsqueeze(2)}, 2);
  const double g = 0.5;  // neighbour-cell offset
  const at::Tensor off =
      torch::tensor({0.f, 0.f, 1.f, 0.f, 0.f, 1.f, -1.f, 0.f, 0.f, -1.f}, fopt).view({5, 2}) * g;

  for (int i = 0; i < nl_; ++i) {
    const at::Tensor anchors = anchors_all[i];
    const int64_t ny = p[i].size(2), nx = p[i].size(3);
    gain.slice(0, 2, 6).copy_(torch::tensor({static_cast<float>(nx), static_cast<float>(ny),
                                             static_cast<float>(nx), static_cast<float>(ny)}));
    at::Tensor t = targets * gain;
    at::Tensor offsets;
    if (nt) {
      const at::Tensor r = t.slice(2, 4, 6) / anchors.unsqueeze(1);
      const at::Tensor keep = std::get<0>(torch::max(r, 1 / r).max(2)) < g_.anchor_t;
      t = t.index({keep});
      const at::Tensor gxy = t.slice(1, 2, 4);
      const at::Tensor gxi = gain.index({torch::tensor({2, 3}, torch::kLong).to(dev)}) - gxy;
      const at::Tensor jk = ((torch::fmod(gxy, 1) < g) & (gxy > 1)).t();
      const at::Tensor lm = ((torch::fmod(gxi, 1) < g) & (gxi > 1)).t();
      const at::Tensor sel = torch::stack({torch::ones_like(jk[0]), jk[0], jk[1], lm[0], lm[1]});
      t = t.repeat({5, 1, 1}).index({sel});
      offsets = (torch::zeros_like(gxy).unsqueeze(0) + off.unsqueeze(1)).index({sel});
    } else {
      t = targets[0];
      offsets = torch::zeros({0, 2}, fopt);
    }
    const at::Tensor b = t.select(1, 0).to(torch::kLong), c = t.select(1, 1).to(torch::kLong);
    const at::Tensor gxy = t.slice(1, 2, 4), gwh = t.slice(1, 4, 6);
    const at::Tensor a = t.select(1, 6).to(torch::kLong);
    const at::Tensor gij = (gxy - offsets).to(torch::kLong);
    const at::Tensor gi = gij.select(1, 0).clamp(0, nx - 1), gj = gij.select(1, 1).clamp(0, ny - 1);
    out.indices.push_back({b, a, gj, gi});
    out.tbox.push_back(torch::cat({gxy - gij, gwh}, 1));
    out.anchors.push_back(anchors.index({a}));
    out.tcls.push_back(c);
  }
  return out;
}

// CIoU of the predicted boxes at the assigned cells (YOLOv5's xy and wh decode) with the targets.
at::Tensor ComputeLoss::assigned_ciou(const at::Tensor& ps, const at::Tensor& anchors,
                                      const at::Tensor& tbox) const {
  const at::Tensor pxy = ps.slice(1, 0, 2).sigmoid() * 2 - 0.5;
  const at::Tensor pwh = (ps.slice(1, 2, 4).sigmoid() * 2).pow(2) * anchors;
  return bbox_ciou(torch::cat({pxy, pwh}, 1), tbox);
}

// One-hot class targets with label smoothing (YOLOv5's smooth_BCE): cp for the class, cn elsewhere.
at::Tensor ComputeLoss::class_targets(const at::Tensor& pcls, const at::Tensor& tcls) const {
  const double cp = 1.0 - 0.5 * g_.label_smoothing, cn = 0.5 * g_.label_smoothing;
  // scatter_ with a number fills on the device; index_put_ with one copies it there from the host,
  // which waits for the GPU.
  return torch::full_like(pcls, cn).scatter_(1, tcls.to(torch::kLong).view({-1, 1}), cp);
}

// The gains, then the total YOLOv5 backpropagates (times the batch size) and the logged items.
LossResult ComputeLoss::total(at::Tensor lbox, at::Tensor lobj, at::Tensor lcls, int64_t bs) const {
  lbox = lbox * g_.box;
  lobj = lobj * g_.obj;
  lcls = lcls * g_.cls;
  return {(lbox + lobj + lcls) * bs, torch::cat({lbox, lobj, lcls}).detach()};
}

LossTargets ComputeLoss::build_dense_targets(const std::vector<at::Tensor>& p,
                                             const at::Tensor& targets_in) const {
  LossTargets out;
  const auto fopt = torch::TensorOptions().dtype(torch::kFloat).device(targets_in.device());
  const at::Tensor anchors_all = anchors_.to(targets_in.device());
  const int64_t nt = targets_in.size(0);
  const double g = 0.5;  // neighbour-cell offset
  // (na, nt, 7): image, class, x, y, w, h, anchor
  const at::Tensor targets =
      torch::cat({targets_in.to(torch::kFloat).unsqueeze(0).expand({na_, nt, 6}),
                  torch::arange(na_, fopt).view({na_, 1, 1}).expand({na_, nt, 1})},
                 2);
  // The cell itself, then right, down, left, up: filled on the device, never copied from the host.
  at::Tensor off = torch::zeros({5, 2}, fopt);
  off[1][0].fill_(g);
  off[2][1].fill_(g);
  off[3][0].fill_(-g);
  off[4][1].fill_(-g);
  for (int i = 0; i < nl_; ++i) {
    const int64_t ny = p[i].size(2), nx = p[i].size(3);
    at::Tensor t = targets.clone();
    for (int col = 2; col < 6; ++col) t.select(2, col).mul_(col % 2 == 0 ? nx : ny);
    const at::Tensor r = t.slice(2, 4, 6) / anchors_all[i].unsqueeze(1);
    const at::Tensor keep = std::get<0>(torch::max(r, 1 / r).max(2)) < g_.anchor_t;  // (na, nt)
    const at::Tensor gxy = t.slice(2, 2, 4);
    const at::Tensor gxi = torch::stack({nx - t.select(2, 2), ny - t.select(2, 3)}, 2);
    const at::Tensor jk = (torch::fmod(gxy, 1) < g) & (gxy > 1);
    const at::Tensor lm = (torch::fmod(gxi, 1) < g) & (gxi > 1);
    const at::Tensor sel = torch::stack({keep, keep & jk.select(2, 0), keep & jk.select(2, 1),
                                         keep & lm.select(2, 0), keep & lm.select(2, 1)});
    // Candidates in YOLOv5's order (offset, anchor, target), so duplicates resolve alike.
    const at::Tensor tt = t.unsqueeze(0).expand({5, na_, nt, 7}).reshape({-1, 7});
    const at::Tensor offsets = off.view({5, 1, 1, 2}).expand({5, na_, nt, 2}).reshape({-1, 2});
    const at::Tensor w = sel.reshape({-1}).to(torch::kFloat);
    const at::Tensor b = tt.select(1, 0).to(torch::kLong), c = tt.select(1, 1).to(torch::kLong);
    const at::Tensor cxy = tt.slice(1, 2, 4), cwh = tt.slice(1, 4, 6);
    const at::Tensor a = tt.select(1, 6).to(torch::kLong);
    const at::Tensor gij = (cxy - offsets).to(torch::kLong);
    const at::Tensor gi = gij.select(1, 0).clamp(0, nx - 1), gj = gij.select(1, 1).clamp(0, ny - 1);
    // Dropped candidates get a unit box, so their (zero-weighted) CIoU stays finite.
    const at::Tensor tbox = torch::cat({cxy - gij, cwh}, 1).masked_fill(w.unsqueeze(1) <= 0, 1.0);
    out.indices.push_back({b, a, gj, gi});
    out.tbox.push_back(tbox);
    out.anchors.push_back(anchors_all[i].index({a}));
    out.tcls.push_back(c);
    out.weights.push_back(w);
  }
  return out;
}

// The compact loss's sums as weighted sums over every candidate: no size depends on the data, so
// nothing is read back to the host. Duplicate cells in tobj keep the last assigned candidate's
// IoU, as the compact form's index_put_ does; dropped ones write to a spare last element.
LossResult ComputeLoss::dense_loss(const std::vector<at::Tensor>& p,
                                   const at::Tensor& targets) const {
  const auto opts = p[0].options().dtype(torch::kFloat);
  at::Tensor lcls = torch::zeros({1}, opts), lbox = torch::zeros({1}, opts),
             lobj = torch::zeros({1}, opts);
  const LossTargets tg = build_dense_targets(p, targets);
  for (int i = 0; i < nl_; ++i) {
    const at::Tensor pi = p[i].to(torch::kFloat);
    const auto& [b, a, gj, gi] = tg.indices[i];
    const int64_t bs = pi.size(0), ny = pi.size(2), nx = pi.size(3);
    const int64_t cells = bs * na_ * ny * nx;
    at::Tensor tobj = torch::zeros({cells + 1}, opts);
    const at::Tensor w = tg.weights[i];
    if (w.size(0)) {
      const at::Tensor n = w.sum().clamp_min(1);
      const at::Tensor ps = pi.index({b, a, gj, gi});  // (N, 5+nc)
      const at::Tensor iou = assigned_ciou(ps, tg.anchors[i], tg.tbox[i]);
      lbox = lbox + ((1.0 - iou) * w).sum() / n;
      const at::Tensor cell = ((b * na_ + a) * ny + gj) * nx + gi;
      tobj.index_put_({cell.masked_fill(w <= 0, cells)}, iou.detach().clamp_min(0));
      if (nc_ > 1) {
        const at::Tensor pcls = ps.slice(1, 5);
        const at::Tensor t = class_targets(pcls, tg.tcls[i]);
        lcls = lcls + (bce_terms(pcls, t, g_.cls_pw) * w.unsqueeze(1)).sum() / (n * nc_);
      }
    }
    const at::Tensor obj = tobj.slice(0, 0, cells).view({bs, na_, ny, nx});
    lobj = lobj + bce(pi.select(4, 4), obj, g_.obj_pw) * balance_[i];
  }
  return total(lbox, lobj, lcls, p[0].size(0));
}

LossResult ComputeLoss::operator()(const std::vector<at::Tensor>& p,
                                   const at::Tensor& targets) const {
  return (*this)(p, targets.to(p[0].device(), /*non_blocking=*/true), !p[0].is_cpu());
}

LossResult ComputeLoss::operator()(const std::vector<at::Tensor>& p, const at::Tensor& targets,
                                   bool dense) const {
  if (dense) return dense_loss(p, targets);
  // Float32 whatever the predictions' dtype: under autocast they are float16 (bfloat16 on CPU),
  // whose sums over a batch lose the small terms and can overflow.
  const auto opts = p[0].options().dtype(torch::kFloat);
  at::Tensor lcls = torch::zeros({1}, opts), lbox = torch::zeros({1}, opts),
             lobj = torch::zeros({1}, opts);
  const LossTargets tg = build_targets(p, targets);
  for (int i = 0; i < nl_; ++i) {
    const at::Tensor pi = p[i].to(torch::kFloat);
    const auto& [b, a, gj, gi] = tg.indices[i];
    at::Tensor tobj = torch::zeros({pi.size(0), pi.size(1), pi.size(2), pi.size(3)}, opts);
    const int64_t n = b.size(0);
    if (n) {
      const at::Tensor ps = pi.index({b, a, gj, gi});  // (n, 5+nc)
      const at::Tensor iou = assigned_ciou(ps, tg.anchors[i], tg.tbox[i]);
      lbox = lbox + (1.0 - iou).mean();
      tobj.index_put_({b, a, gj, gi}, iou.detach().clamp_min(0));
      if (nc_ > 1) {
        const at::Tensor pcls = ps.slice(1, 5);
        lcls = lcls + bce(pcls, class_targets(pcls, tg.tcls[i]), g_.cls_pw);
      }
    }
    lobj = lobj + bce(pi.select(4, 4), tobj, g_.obj_pw) * balance_[i];
  }
  return total(lbox, lobj, lcls, p[0].size(0));
}

}  // namespace yolo

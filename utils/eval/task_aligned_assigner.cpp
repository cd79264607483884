#include "utils/eval/task_aligned_assigner.h"

#include <torch/torch.h>

#include <cmath>

namespace yolo {

at::Tensor bbox_ciou_xyxy(const at::Tensor& box1, const at::Tensor& box2, double eps) {
  const auto a = box1.unbind(-1), b = box2.unbind(-1);
  const at::Tensor &b1x1 = a[0], &b1y1 = a[1], &b1x2 = a[2], &b1y2 = a[3];
  const at::Tensor &b2x1 = b[0], &b2y1 = b[1], &b2x2 = b[2], &b2y2 = b[3];
  const at::Tensor w1 = b1x2 - b1x1, h1 = b1y2 - b1y1 + eps;
  const at::Tensor w2 = b2x2 - b2x1, h2 = b2y2 - b2y1 + eps;
  const at::Tensor inter = (torch::minimum(b1x2, b2x2) - torch::maximum(b1x1, b2x1)).clamp_min(0) *
                           (torch::minimum(b1y2, b2y2) - torch::maximum(b1y1, b2y1)).clamp_min(0);
  const at::Tensor uni = w1 * h1 + w2 * h2 - inter + eps;
  const at::Tensor iou = inter / uni;
  const at::Tensor cw = torch::maximum(b1x2, b2x2) - torch::minimum(b1x1, b2x1);
  const at::Tensor ch = torch::maximum(b1y2, b2y2) - torch::minimum(b1y1, b2y1);
  const at::Tensor c2 = cw.pow(2) + ch.pow(2) + eps;
  const at::Tensor rho2 =
      ((b2x1 + b2x2 - b1x1 - b1x2).pow(2) + (b2y1 + b2y2 - b1y1 - b1y2).pow(2)) / 4;
  const at::Tensor v = (4 / (M_PI * M_PI)) * (torch::atan(w2 / h2) - torch::atan(w1 / h1)).pow(2);
  at::Tensor alpha;
  {
    torch::NoGradGuard no_grad;
    alpha = v / (1 - iou + v + eps);
  }
  return iou - (rho2 / c2 + v * alpha);
}

namespace {

// (bs, n, A): anchor centres strictly inside each (widened) box.
at::Tensor candidates_in_boxes(const at::Tensor& anchors, const at::Tensor& gt_bboxes,
                               const at::Tensor& mask_gt, const TalOptions& o) {
  const at::Tensor xy = (gt_bboxes.slice(-1, 0, 2) + gt_bboxes.slice(-1, 2, 4)) / 2;
  at::Tensor wh = gt_bboxes.slice(-1, 2, 4) - gt_bboxes.slice(-1, 0, 2);
  const at::Tensor narrow = (wh < o.widen_to) & mask_gt.to(torch::kBool);
  wh = torch::where(narrow, torch::full({}, o.widen_to, wh.options()), wh);
  const at::Tensor lt = (xy - wh / 2).unsqueeze(2), rb = (xy + wh / 2).unsqueeze(2);  // (bs,n,1,2)
  const at::Tensor ax = anchors.select(1, 0), ay = anchors.select(1, 1);
  return (ax - lt.select(-1, 0) > o.eps) & (ay - lt.select(-1, 1) > o.eps) &
         (rb.select(-1, 0) - ax > o.eps) & (rb.select(-1, 1) - ay > o.eps);
}

// Ultralytics' select_topk_candidates: 1 where an anchor is in a box's top-k once (int8).
at::Tensor topk_candidates(const at::Tensor& metric, const at::Tensor& mask_gt, int topk) {
  auto [values, idx] = torch::topk(metric, topk, -1, /*largest=*/true);
  idx.masked_fill_(~mask_gt.to(torch::kBool).expand({-1, -1, topk}), 0);
  at::Tensor count = torch::zeros(metric.sizes(), metric.options().dtype(torch::kChar));
  count.scatter_add_(-1, idx, torch::ones_like(idx, idx.options().dtype(torch::kChar)));
  count.masked_fill_(count > 1, 0);
  return count;
}

}  // namespace

TalTargets task_aligned_assign(const at::Tensor& pd_scores, const at::Tensor& pd_bboxes,
                               const at::Tensor& anchors, const at::Tensor& gt_labels,
                               const at::Tensor& gt_bboxes, const at::Tensor& mask_gt,
                               const TalOptions& o) {
  torch::NoGradGuard no_grad;
  const int64_t bs = pd_scores.size(0), na = pd_scores.size(1), nc = pd_scores.size(2);
  const int64_t n = gt_bboxes.size(1);
  TalTargets t;
  if (n == 0) {
    t.labels = torch::full({bs, na}, nc, pd_scores.options().dtype(torch::kLong));
    t.bboxes = torch::zeros_like(pd_bboxes);
    t.scores = torch::zeros_like(pd_scores);
    t.fg = torch::zeros({bs, na}, pd_scores.options().dtype(torch::kBool));
    t.target_gt_idx = torch::zeros({bs, na}, pd_scores.options().dtype(torch::kLong));
    return t;
  }
  const at::Tensor in_gts = candidates_in_boxes(anchors, gt_bboxes, mask_gt, o);
  const at::Tensor valid = in_gts & mask_gt.to(torch::kBool);  // (bs, n, A)
  // Score of each box's class at each anchor, and CIoU of each box with each prediction.
  const at::Tensor labels = gt_labels.to(torch::kLong);  // (bs, n, 1)
  at::Tensor overlaps, align;
  if (pd_scores.is_cpu() && !o.dense) {
    // The candidate pairs alone (their count is a host read, free here): far less memory than
    // every box against every anchor.
    const auto idx = valid.nonzero().unbind(1);  // image, box, anchor
    const at::Tensor ciou =
        bbox_ciou_xyxy(gt_bboxes.index({idx[0], idx[1]}), pd_bboxes.index({idx[0], idx[2]}))
            .clamp_min(0);
    const at::Tensor score = pd_scores.index({idx[0], idx[2], labels.index({idx[0], idx[1], 0})});
    overlaps =
        torch::zeros({bs, n, na}, pd_bboxes.options()).index_put_({idx[0], idx[1], idx[2]}, ciou);
    align = torch::zeros({bs, n, na}, pd_scores.options())
                .index_put_({idx[0], idx[1], idx[2]}, score.pow(o.alpha) * ciou.pow(o.beta));
  } else {  // every pair, masked: no host read
    const at::Tensor score = pd_scores.transpose(1, 2).gather(1, labels.expand({-1, -1, na}));
    const at::Tensor ciou =
        bbox_ciou_xyxy(gt_bboxes.unsqueeze(2), pd_bboxes.unsqueeze(1)).clamp_min(0);
    const at::Tensor zero = torch::zeros({}, ciou.options());
    overlaps = torch::where(valid, ciou, zero);
    align = torch::where(valid, score.pow(o.alpha) * ciou.pow(o.beta), zero);
  }

  at::Tensor mask_pos = topk_candidates(align, mask_gt, o.topk)
                            .mul_(in_gts.to(torch::kChar))
                            .mul_(mask_gt.to(torch::kBool).to(torch::kChar));
  // An anchor in several boxes' lists goes to the box it overlaps most.
  const at::Tensor multi = (mask_pos.sum(-2).unsqueeze(1) > 1).expand({-1, n, -1});
  const at::Tensor best = std::get<1>(overlaps.max(1));  // (bs, A)
  const at::Tensor is_best = torch::zeros_like(mask_pos).scatter_(1, best.unsqueeze(1), 1);
  mask_pos = torch::where(multi, is_best, mask_pos);
  if (o.topk2 > 0 && o.topk2 != o.topk) {
    const at::Tensor best_k = std::get<1>(torch::topk(align * mask_pos, o.topk2, -1));
    mask_pos = mask_pos * torch::zeros_like(mask_pos).scatter_(-1, best_k, 1);
  }
  auto [fg, gt_idx] = mask_pos.max(-2);  // (bs, A)

  const at::Tensor flat_idx =
      gt_idx + torch::arange(bs, gt_idx.options()).unsqueeze(-1) * n;  // (bs, A)
  t.labels = labels.flatten().index({flat_idx}).clamp_(0);
  t.bboxes = gt_bboxes.reshape({-1, 4}).index({flat_idx});
  t.fg = fg > 0;
  t.target_gt_idx = gt_idx;
  at::Tensor scores = torch::zeros({bs, na, nc}, pd_scores.options().dtype(torch::kChar));
  scores.scatter_(2, t.labels.unsqueeze(-1), 1);
  scores = scores * t.fg.unsqueeze(-1);

  align = align * mask_pos;
  const at::Tensor pos_align = std::get<0>(align.max(-1, /*keepdim=*/true));
  overlaps = overlaps * mask_pos;
  const at::Tensor pos_overlaps = std::get<0>(overlaps.max(-1, /*keepdim=*/true));
  align = align * pos_overlaps / (pos_align + o.eps);
  const at::Tensor norm = std::get<0>(align.max(-2)).unsqueeze(-1);  // (bs, A, 1)
  t.scores = scores * norm;
  return t;
}

}  // namespace yolo

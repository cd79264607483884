#include "utils/eval/anchor_free_loss.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace yolo {

namespace {

struct Flat {
  at::Tensor distri, scores;  // (bs, A, 4*reg_max), (bs, A, nc), float32
  at::Tensor anchors, strides;
  double img_h = 0, img_w = 0;  // pixels
};

// The levels side by side, with their anchor points (cells + 0.5) and strides.
Flat flatten_levels(const std::vector<at::Tensor>& p, int nc, int reg_max,
                    const std::vector<float>& strides) {
  const int64_t bs = p[0].size(0), no = nc + 4 * reg_max;
  std::vector<at::Tensor> flat, points, level_strides;
  const auto opts = p[0].options().dtype(torch::kFloat);
  for (size_t i = 0; i < p.size(); ++i) {
    const int64_t ny = p[i].size(2), nx = p[i].size(3);
    flat.push_back(p[i].reshape({bs, no, ny * nx}));
    const at::Tensor sx = torch::arange(nx, opts) + 0.5, sy = torch::arange(ny, opts) + 0.5;
    const auto yx = torch::meshgrid({sy, sx}, "ij");
    points.push_back(torch::stack({yx[1], yx[0]}, -1).view({-1, 2}));
    level_strides.push_back(torch::full({ny * nx, 1}, strides[i], opts));
  }
  const at::Tensor all = torch::cat(flat, 2).to(torch::kFloat);
  Flat f;
  f.distri = all.slice(1, 0, 4 * reg_max).permute({0, 2, 1}).contiguous();
  f.scores = all.slice(1, 4 * reg_max).permute({0, 2, 1}).contiguous();
  f.anchors = torch::cat(points);
  f.strides = torch::cat(level_strides);
  // float, as the pixel scale the reference keeps in a float32 tensor
  f.img_h = static_cast<float>(p[0].size(2) * strides[0]);
  f.img_w = static_cast<float>(p[0].size(3) * strides[0]);
  return f;
}

// Expected distances (softmax over the bins times 0..reg_max-1), then xyxy around the anchors.
at::Tensor decode_boxes(const at::Tensor& distri, const at::Tensor& anchors, int reg_max) {
  at::Tensor d = distri;
  if (reg_max > 1) {
    const int64_t b = d.size(0), a = d.size(1);
    const at::Tensor proj = torch::arange(reg_max, d.options());
    d = d.view({b, a, 4, reg_max}).softmax(3).matmul(proj);
  }
  const auto lt_rb = d.chunk(2, -1);
  return torch::cat({anchors - lt_rb[0], anchors + lt_rb[1]}, -1);
}

}  // namespace

AnchorFreeLoss::AnchorFreeLoss(const AnchorFreeGains& gains, int nc, int reg_max,
                               std::vector<float> strides, TalOptions tal)
    : g_(gains), nc_(nc), reg_max_(reg_max), strides_(std::move(strides)), tal_(tal) {
  tal_.widen_to = strides_.size() > 1 ? strides_[1] : strides_.at(0);
}

at::Tensor AnchorFreeLoss::prepare_targets(const at::Tensor& targets, int64_t bs,
                                           const torch::Device& device) const {
  // A device tensor costs one read back; the trainer and the validator pass the host copy.
  const at::Tensor t = targets.to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t n = t.size(0);
  const float* row = t.data_ptr<float>();
  // Rows per image in a plain pass over the host rows: no tensor op, nothing read from a device.
  std::vector<int64_t> count(static_cast<size_t>(bs), 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto img = static_cast<int64_t>(row[i * 6]);
    TORCH_CHECK(img >= 0 && img < bs, "target row ", i, " names image ", img, " of a batch of ",
                bs);
    ++count[img];
  }
  const int64_t n_max = n ? *std::max_element(count.begin(), count.end()) : 0;
  // Page-locked on CUDA, so the one copy queues behind the step instead of waiting for it.
  auto opts = torch::TensorOptions().dtype(torch::kFloat);
  if (device.is_cuda()) opts = opts.pinned_memory(true);
  at::Tensor out = torch::zeros({bs, n_max, 5}, opts);
  float* o = out.data_ptr<float>();
  std::fill(count.begin(), count.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const float* r = row + i * 6;
    const auto img = static_cast<int64_t>(r[0]);
    float* d = o + (img * n_max + count[img]++) * 5;
    d[0] = r[1];  // class, then cx, cy, w, h still normalised
    std::copy(r + 2, r + 6, d + 1);
  }
  return out.to(device, /*non_blocking=*/true);
}

namespace {

// (w, h, w, h) as a device tensor, filled there: a copy from pageable host memory would wait.
at::Tensor pixel_scale(const Flat& f, const at::TensorOptions& opts) {
  at::Tensor scale = torch::full({4}, f.img_w, opts);
  scale.slice(0, 1, 4, 2).fill_(f.img_h);
  return scale;
}

// Normalised (class, cx, cy, w, h) rows to class and xyxy pixels on their device (scaled, then
// converted, in the reference's order).
std::pair<at::Tensor, at::Tensor> to_pixels(const at::Tensor& gt, const Flat& f) {
  const at::Tensor xywh = gt.slice(2, 1, 5) * pixel_scale(f, gt.options());
  const at::Tensor xy = xywh.slice(2, 0, 2), half = xywh.slice(2, 2, 4) / 2;
  return {gt.slice(2, 0, 1), torch::cat({xy - half, xy + half}, 2)};
}

}  // namespace

AnchorFreeLoss::Parts AnchorFreeLoss::assign(const std::vector<at::Tensor>& p,
                                             const at::Tensor& targets) const {
  const Flat f = flatten_levels(p, nc_, reg_max_, strides_);
  const int64_t bs = p[0].size(0);
  const auto [labels, boxes] = to_pixels(prepare_targets(targets, bs, p[0].device()), f);
  const at::Tensor mask_gt = boxes.sum(2, true).gt(0.0);
  Parts out;
  out.pred_bboxes = decode_boxes(f.distri, f.anchors, reg_max_);
  out.anchors = f.anchors;
  out.strides = f.strides;
  out.assigned =
      task_aligned_assign(f.scores.detach().sigmoid(), out.pred_bboxes.detach() * f.strides,
                          f.anchors * f.strides, labels, boxes, mask_gt, tal_);
  return out;
}

LossResult AnchorFreeLoss::operator()(const std::vector<at::Tensor>& p,
                                      const at::Tensor& targets) const {
  return with_prepared(p, prepare_targets(targets, p[0].size(0), p[0].device()));
}

LossResult AnchorFreeLoss::with_prepared(const std::vector<at::Tensor>& p,
                                         const at::Tensor& prepared) const {
  const Flat f = flatten_levels(p, nc_, reg_max_, strides_);
  const int64_t bs = p[0].size(0);
  const auto [labels, boxes] = to_pixels(prepared, f);
  const at::Tensor mask_gt = boxes.sum(2, true).gt(0.0);
  const at::Tensor pred_bboxes = decode_boxes(f.distri, f.anchors, reg_max_);
  const TalTargets a =
      task_aligned_assign(f.scores.detach().sigmoid(), pred_bboxes.detach() * f.strides,
                          f.anchors * f.strides, labels, boxes, mask_gt, tal_);
  const at::Tensor tss = a.scores.sum().clamp_min(1);
  const at::Tensor lcls =
      torch::binary_cross_entropy_with_logits(f.scores, a.scores, {}, {}, at::Reduction::Sum) / tss;

  // Box and DFL terms over the foreground, as dense sums (no host read of its size).
  const at::Tensor fg = a.fg;
  const at::Tensor weight = a.scores.sum(-1);  // (bs, A), 0 off the foreground
  const at::Tensor target_boxes = a.bboxes / f.strides;
  const at::Tensor zero = torch::zeros({}, weight.options());
  const at::Tensor iou = bbox_ciou_xyxy(pred_bboxes, target_boxes);
  const at::Tensor lbox = torch::where(fg, (1.0 - iou) * weight, zero).sum() / tss;
  at::Tensor ldfl = torch::zeros({}, weight.options());
  if (reg_max_ > 1) {
    const at::Tensor ltrb = torch::cat({f.anchors - target_boxes.slice(-1, 0, 2),
                                        target_boxes.slice(-1, 2, 4) - f.anchors},
                                       -1)
                                .clamp(0, reg_max_ - 1 - 0.01);  // (bs, A, 4)
    const at::Tensor tl = ltrb.to(torch::kLong), tr = tl + 1;
    const at::Tensor wl = tr.to(torch::kFloat) - ltrb, wr = 1 - wl;
    const at::Tensor logp =
        torch::log_softmax(f.distri.view({bs, -1, 4, reg_max_}), -1);  // (bs, A, 4, reg_max)
    const at::Tensor side = logp.gather(-1, tl.unsqueeze(-1)).squeeze(-1) * wl +
                            logp.gather(-1, tr.unsqueeze(-1)).squeeze(-1) * wr;
    ldfl = torch::where(fg, -side.mean(-1) * weight, zero).sum() / tss;
  } else {
    // Raw distances (YOLO26): L1 between predicted and target distances as fractions of the
    // image's width and height, in the DFL term's place.
    const at::Tensor scale = pixel_scale(f, weight.options());  // w, h, w, h
    const at::Tensor target = torch::cat({f.anchors - target_boxes.slice(-1, 0, 2),
                                          target_boxes.slice(-1, 2, 4) - f.anchors},
                                         -1) *
                              f.strides / scale;
    const at::Tensor l1 = (f.distri * f.strides / scale - target).abs().mean(-1);
    ldfl = torch::where(fg, l1 * weight, zero).sum() / tss;
  }
  const at::Tensor items = torch::stack({lbox * g_.box, lcls * g_.cls, ldfl * g_.dfl});
  LossResult r;
  r.loss = (items.sum() * bs).view({1});
  r.items = items.detach();
  return r;
}

}  // namespace yolo

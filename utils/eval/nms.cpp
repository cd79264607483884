#include "utils/eval/nms.h"

#include <torch/torch.h>

#include "utils/core/boxes.h"

namespace yolo {

namespace {

// IoU > thres between every box of a (n, 4) and every box of b (m, 4), xyxy: (n, m) bools.
at::Tensor overlaps(const at::Tensor& a, const at::Tensor& b, double thres) {
  const at::Tensor area_a = (a.select(1, 2) - a.select(1, 0)) * (a.select(1, 3) - a.select(1, 1));
  const at::Tensor area_b = (b.select(1, 2) - b.select(1, 0)) * (b.select(1, 3) - b.select(1, 1));
  const at::Tensor lt = torch::max(a.slice(1, 0, 2).unsqueeze(1), b.slice(1, 0, 2).unsqueeze(0));
  const at::Tensor rb = torch::min(a.slice(1, 2, 4).unsqueeze(1), b.slice(1, 2, 4).unsqueeze(0));
  const at::Tensor wh = (rb - lt).clamp_min(0);
  const at::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  return inter / (area_a.unsqueeze(1) + area_b.unsqueeze(0) - inter) > thres;
}

}  // namespace

// Blocks of boxes in score order: the IoUs of a block against the boxes kept so far and within
// itself are tensor ops on the boxes' device; only the block's (B x B) overlap bits come to the
// host for the sequential greedy pass. Ends at max_keep kept boxes, so a crowded image costs
// O(n * max_keep) comparisons instead of O(n^2).
at::Tensor nms(const at::Tensor& boxes_in, const at::Tensor& scores_in, double iou_thres,
               int64_t max_keep) {
  constexpr int64_t kBlock = 512;
  const int64_t n = boxes_in.size(0);
  const auto long_opts = torch::TensorOptions(torch::kLong).device(boxes_in.device());
  if (n == 0 || max_keep == 0) return torch::empty({0}, long_opts);
  if (max_keep < 0) max_keep = n;
  torch::NoGradGuard no_grad;
  const at::Tensor order = scores_in.argsort(0, /*descending=*/true);
  const at::Tensor boxes = boxes_in.to(torch::kFloat).index_select(0, order);
  std::vector<int64_t> keep;  // positions in `order`
  at::Tensor kept_boxes = boxes.slice(0, 0, 0);
  for (int64_t start = 0; start < n && static_cast<int64_t>(keep.size()) < max_keep;
       start += kBlock) {
    const at::Tensor block = boxes.slice(0, start, std::min(start + kBlock, n));
    const int64_t b = block.size(0);
    at::Tensor dead = kept_boxes.size(0) ? overlaps(block, kept_boxes, iou_thres).any(1)
                                         : torch::zeros({b}, block.options().dtype(torch::kBool));
    // Row i: the later boxes of the block that box i suppresses, if box i is kept.
    const at::Tensor within = overlaps(block, block, iou_thres).triu(1);
    const at::Tensor host = torch::cat({dead.unsqueeze(1), within}, 1).to(torch::kCPU).contiguous();
    const bool* m = host.data_ptr<bool>();
    std::vector<char> gone(b);
    for (int64_t i = 0; i < b; ++i) gone[i] = m[i * (b + 1)];
    const size_t before = keep.size();
    for (int64_t i = 0; i < b && static_cast<int64_t>(keep.size()) < max_keep; ++i) {
      if (gone[i]) continue;
      keep.push_back(start + i);
      const bool* row = m + i * (b + 1) + 1;
      for (int64_t j = i + 1; j < b; ++j) gone[j] |= row[j];
    }
    if (keep.size() > before) {
      const at::Tensor fresh = torch::tensor(
          std::vector<int64_t>(keep.begin() + static_cast<int64_t>(before), keep.end()), long_opts);
      kept_boxes = torch::cat({kept_boxes, block.index_select(0, fresh - start)});
    }
  }
  return order.index_select(0, torch::tensor(keep, torch::kLong).to(order.device()));
}

std::vector<at::Tensor> non_max_suppression(const at::Tensor& prediction, const NmsOptions& opt) {
  TORCH_CHECK(opt.conf_thres >= 0 && opt.conf_thres <= 1, "Invalid Confidence threshold ",
              opt.conf_thres, ", valid values are between 0.0 and 1.0");
  TORCH_CHECK(opt.iou_thres >= 0 && opt.iou_thres <= 1, "Invalid IoU ", opt.iou_thres,
              ", valid values are between 0.0 and 1.0");
  torch::NoGradGuard no_grad;
  constexpr double kMaxWh = 7680;     // class offset: boxes of different classes never overlap
  constexpr int64_t kMaxNms = 30000;  // boxes into NMS at most
  const int64_t bs = prediction.size(0);
  const int64_t nc = prediction.size(2) - 5;
  const bool multi_label = opt.multi_label && nc > 1;
  std::vector<at::Tensor> output(bs, torch::zeros({0, 6}, prediction.options()));
  const at::Tensor xc = prediction.select(2, 4) > opt.conf_thres;
  for (int64_t xi = 0; xi < bs; ++xi) {
    at::Tensor x = prediction[xi].index({xc[xi]});
    if (x.size(0) == 0) continue;
    const at::Tensor cls_conf = x.slice(1, 5) * x.slice(1, 4, 5);
    const at::Tensor box = xywh2xyxy(x.slice(1, 0, 4));
    if (multi_label) {
      const at::Tensor ij = (cls_conf > opt.conf_thres).nonzero();
      const at::Tensor i = ij.select(1, 0), j = ij.select(1, 1);
      x = torch::cat(
          {box.index({i}), cls_conf.index({i, j}).unsqueeze(1), j.unsqueeze(1).to(x.scalar_type())},
          1);
    } else {
      auto [conf, j] = cls_conf.max(1, /*keepdim=*/true);
      x = torch::cat({box, conf, j.to(x.scalar_type())}, 1).index({conf.view(-1) > opt.conf_thres});
    }
    if (!opt.classes.empty()) {
      const at::Tensor cls = torch::tensor(opt.classes, x.options());
      x = x.index({(x.slice(1, 5, 6) == cls).any(1)});
    }
    const int64_t n = x.size(0);
    if (n == 0) continue;
    at::Tensor order = x.select(1, 4).argsort(0, /*descending=*/true);
    if (n > kMaxNms) order = order.slice(0, 0, kMaxNms);
    x = x.index({order});
    const at::Tensor offset = x.slice(1, 5, 6) * (opt.agnostic ? 0.0 : kMaxWh);
    const at::Tensor keep =
        nms(x.slice(1, 0, 4) + offset, x.select(1, 4), opt.iou_thres, opt.max_det);
    output[xi] = x.index({keep});
  }
  return output;
}

}  // namespace yolo

#include "utils/eval/nms.h"

#include <torch/torch.h>

#include "utils/core/boxes.h"

namespace yolo {

at::Tensor nms(const at::Tensor& boxes_in, const at::Tensor& scores_in, double iou_thres) {
  if (boxes_in.size(0) == 0) return torch::empty({0}, torch::kLong);
  const at::Tensor boxes = boxes_in.to(torch::kCPU, torch::kFloat).contiguous();
  const at::Tensor order = scores_in.to(torch::kCPU).argsort(0, /*descending=*/true);
  const int64_t n = boxes.size(0);
  const float* b = boxes.data_ptr<float>();
  const int64_t* ord = order.data_ptr<int64_t>();
  std::vector<float> area(n);
  for (int64_t i = 0; i < n; ++i)
    area[i] = (b[4 * i + 2] - b[4 * i]) * (b[4 * i + 3] - b[4 * i + 1]);
  std::vector<char> suppressed(n, 0);
  std::vector<int64_t> keep;
  for (int64_t oi = 0; oi < n; ++oi) {
    const int64_t i = ord[oi];
    if (suppressed[i]) continue;
    keep.push_back(i);
    const float* bi = b + 4 * i;
    for (int64_t oj = oi + 1; oj < n; ++oj) {
      const int64_t j = ord[oj];
      if (suppressed[j]) continue;
      const float* bj = b + 4 * j;
      const float w = std::max(0.f, std::min(bi[2], bj[2]) - std::max(bi[0], bj[0]));
      const float h = std::max(0.f, std::min(bi[3], bj[3]) - std::max(bi[1], bj[1]));
      const float inter = w * h;
      if (inter / (area[i] + area[j] - inter) > iou_thres) suppressed[j] = 1;
    }
  }
  return torch::tensor(keep, torch::kLong).to(boxes_in.device());
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
    at::Tensor keep = nms(x.slice(1, 0, 4) + offset, x.select(1, 4), opt.iou_thres);
    if (keep.size(0) > opt.max_det) keep = keep.slice(0, 0, opt.max_det);
    output[xi] = x.index({keep});
  }
  return output;
}

}  // namespace yolo

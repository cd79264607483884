#include "utils/eval/nms.h"

#include <torch/torch.h>

#include <algorithm>
#include <tuple>

#include "utils/eval/boxes.h"

namespace yolo {

namespace {

constexpr double kMaxWh = 7680;     // class offset: boxes of different classes never overlap
constexpr int64_t kMaxNms = 30000;  // boxes into NMS at most, per image

void check_thresholds(const NmsOptions& opt) {
  TORCH_CHECK(opt.conf_thres >= 0 && opt.conf_thres <= 1, "Invalid Confidence threshold ",
              opt.conf_thres, ", valid values are between 0.0 and 1.0");
  TORCH_CHECK(opt.iou_thres >= 0 && opt.iou_thres <= 1, "Invalid IoU ", opt.iou_thres,
              ", valid values are between 0.0 and 1.0");
}

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

// Every image's NMS candidates, ranked: descending conf, equal confs in candidate order, the
// invalid ones (below the thresholds, other classes, padding) last; k per image.
struct Candidates {
  at::Tensor boxes;  // (bs, k, 4) xyxy
  at::Tensor conf;   // (bs, k)
  at::Tensor cls;    // (bs, k) float
  at::Tensor valid;  // (bs, k) bool
};

// The k highest columns of each row of `key` in descending order, equal keys in column order:
// a stable sort, as topk alone orders ties arbitrarily.
at::Tensor rank_columns(const at::Tensor& key, int64_t k) {
  if (k >= key.size(1)) return std::get<1>(key.sort(/*stable=*/true, 1, /*descending=*/true));
  const at::Tensor top = std::get<1>(key.topk(k, 1, /*largest=*/true, /*sorted=*/false));
  const at::Tensor cols = std::get<0>(top.sort(1));
  const at::Tensor by_key =
      std::get<1>(key.gather(1, cols).sort(/*stable=*/true, 1, /*descending=*/true));
  return cols.gather(1, by_key);
}

// non_max_suppression's candidates for the whole batch as a (bs, m) table: with multi-label one
// column per box and class, box-major as nonzero() lists them, else one per box with its best
// class.
Candidates candidates(const at::Tensor& prediction, const NmsOptions& opt) {
  const at::Tensor p = prediction.to(torch::kFloat);
  const int64_t bs = p.size(0), n = p.size(1), nc = p.size(2) - 5;
  const bool multi_label = opt.multi_label && nc > 1;
  const at::Tensor cls_conf = p.slice(2, 5) * p.slice(2, 4, 5);  // (bs, n, nc)
  const at::Tensor box = xywh2xyxy(p.slice(2, 0, 4).reshape({-1, 4})).view({bs, n, 4});
  const at::Tensor obj_ok = p.select(2, 4) > opt.conf_thres;
  at::Tensor class_ok;  // (nc) bool, opt.classes; filled on the device (a copy there would wait)
  if (!opt.classes.empty()) {
    class_ok = torch::zeros({nc}, p.options().dtype(torch::kBool));
    for (int c : opt.classes) {
      if (c >= 0 && c < nc) class_ok[c].fill_(true);
    }
  }
  at::Tensor conf, cls, valid;
  if (multi_label) {
    at::Tensor v = obj_ok.unsqueeze(2) & (cls_conf > opt.conf_thres);
    if (class_ok.defined()) v = v & class_ok;
    conf = cls_conf.reshape({bs, n * nc});
    valid = v.reshape({bs, n * nc});
  } else {
    auto [best, j] = cls_conf.max(2);
    conf = best;
    cls = j.to(torch::kFloat);
    valid = obj_ok & (best > opt.conf_thres);
    if (class_ok.defined()) valid = valid & class_ok.index_select(0, j.reshape(-1)).view_as(j);
  }
  const at::Tensor key = conf.masked_fill(valid.logical_not(), -1);
  const int64_t k = std::min(kMaxNms, key.size(1));
  const at::Tensor order = rank_columns(key, k);
  Candidates c;
  c.conf = key.gather(1, order);
  c.valid = valid.gather(1, order);
  const at::Tensor box_of = multi_label ? at::div(order, nc, "floor") : order;
  c.cls = multi_label ? order.remainder(nc).to(torch::kFloat) : cls.gather(1, order);
  c.boxes = box.gather(1, box_of.unsqueeze(2).expand({bs, k, 4}));
  return c;
}

// candidates() a chunk of images at a time, so that the (images, boxes x classes) score tables
// stay within opt.max_chunk_elements, then the chunks' rankings side by side: each image's
// ranking is its own, so the result is the same.
Candidates chunked_candidates(const at::Tensor& prediction, const NmsOptions& opt) {
  const int64_t bs = prediction.size(0);
  const int64_t per_image = std::max<int64_t>(1, prediction.size(1) * (prediction.size(2) - 5));
  const int64_t chunk = std::max<int64_t>(1, opt.max_chunk_elements / per_image);
  if (chunk >= bs) return candidates(prediction, opt);
  std::vector<at::Tensor> boxes, conf, cls, valid;
  for (int64_t b = 0; b < bs; b += chunk) {
    const Candidates c = candidates(prediction.slice(0, b, std::min(bs, b + chunk)), opt);
    boxes.push_back(c.boxes);
    conf.push_back(c.conf);
    cls.push_back(c.cls);
    valid.push_back(c.valid);
  }
  return {torch::cat(boxes), torch::cat(conf), torch::cat(cls), torch::cat(valid)};
}

// Greedy NMS of every image's ranked candidates at once. Round t keeps each image's first live
// candidate, which is its t-th kept box, and kills the live ones overlapping it above iou_thres:
// the sequential greedy pass's answer in max_det rounds of (bs, k) tensor ops, with the IoU
// computed as nms() computes it, and no host read. Returns (bs, rounds) positions in the ranking,
// -1 past an image's last kept box.
at::Tensor greedy_keep(const Candidates& c, const NmsOptions& opt) {
  const int64_t bs = c.boxes.size(0), k = c.boxes.size(1);
  const at::Tensor boxes = c.boxes + c.cls.unsqueeze(2) * (opt.agnostic ? 0.0 : kMaxWh);
  const at::Tensor xy1 = boxes.slice(2, 0, 2), xy2 = boxes.slice(2, 2, 4);
  const at::Tensor area =
      (boxes.select(2, 2) - boxes.select(2, 0)) * (boxes.select(2, 3) - boxes.select(2, 1));
  // Live candidates hold k - position, dead ones 0: a row's max is its first live candidate.
  at::Tensor rank = torch::arange(k, 0, -1, c.conf.options().dtype(torch::kInt))
                        .unsqueeze(0)
                        .masked_fill(c.valid.logical_not(), 0);
  int64_t rounds = opt.max_det < 0 ? k : std::min<int64_t>(opt.max_det, k);
  if (bs == 0) rounds = 0;
  std::vector<at::Tensor> picks;
  for (int64_t t = 0; t < rounds; ++t) {
    auto [top, pick] = rank.max(1, /*keepdim=*/true);  // (bs, 1)
    picks.push_back(pick.masked_fill(top == 0, -1));
    const at::Tensor pb = boxes.gather(1, pick.unsqueeze(2).expand({bs, 1, 4}));
    const at::Tensor lt = torch::max(xy1, pb.slice(2, 0, 2));
    const at::Tensor rb = torch::min(xy2, pb.slice(2, 2, 4));
    const at::Tensor wh = (rb - lt).clamp_min(0);
    const at::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
    rank.masked_fill_(inter / (area + area.gather(1, pick) - inter) > opt.iou_thres, 0);
    rank.scatter_(1, pick, 0);  // itself too, which IoU 1 does not exceed at iou_thres 1
  }
  if (picks.empty()) return torch::empty({bs, 0}, c.conf.options().dtype(torch::kLong));
  return torch::cat(picks, 1);
}

// Per-image results as one padded (bs, r, 6) batch, padding rows with conf -1.
BatchDetections pack(const std::vector<at::Tensor>& images) {
  int64_t r = 0;
  for (const at::Tensor& d : images) r = std::max(r, d.size(0));
  BatchDetections b;
  b.kept = torch::zeros({static_cast<int64_t>(images.size()), r, 6}, torch::kFloat);
  b.kept.select(2, 4).fill_(-1);
  for (size_t i = 0; i < images.size(); ++i) {
    const int64_t n = images[i].size(0);
    b.kept.select(0, static_cast<int64_t>(i)).slice(0, 0, n).copy_(images[i]);
    b.counts.push_back(n);
  }
  return b;
}

}  // namespace

at::Tensor BatchDetections::image(int64_t i) const {
  return kept.select(0, i).slice(0, 0, counts.at(static_cast<size_t>(i)));
}

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

std::vector<at::Tensor> topk_detections(const at::Tensor& prediction, const NmsOptions& opt) {
  check_thresholds(opt);
  torch::NoGradGuard no_grad;
  const at::Tensor p = prediction.to(torch::kFloat);
  const int64_t bs = p.size(0), n = p.size(1), nc = p.size(2) - 5;
  const int64_t k = std::min<int64_t>(opt.max_det, n);
  const at::Tensor scores = p.slice(2, 5);  // (bs, n, nc); the objectness column is 1
  at::Tensor conf, cls, anchor;
  if (opt.agnostic) {
    const auto [best, label] = scores.max(-1);
    std::tie(conf, anchor) = best.topk(k, 1);
    cls = label.gather(1, anchor).to(torch::kFloat);
  } else {
    const at::Tensor top = std::get<1>(std::get<0>(scores.max(-1)).topk(k, 1));  // (bs, k)
    const at::Tensor s = scores.gather(1, top.unsqueeze(-1).expand({bs, k, nc}));
    at::Tensor flat;
    std::tie(conf, flat) = s.flatten(1).topk(k, 1);
    cls = flat.remainder(nc).to(torch::kFloat);
    anchor = top.gather(1, flat.div(nc, "floor"));
  }
  const at::Tensor xywh = p.slice(2, 0, 4).gather(1, anchor.unsqueeze(-1).expand({bs, k, 4}));
  at::Tensor keep = conf > opt.conf_thres;
  if (!opt.classes.empty()) {
    keep &=
        torch::isin(cls, torch::tensor(opt.classes, torch::kLong).to(cls.device(), cls.dtype()));
  }
  const at::Tensor rows = torch::cat({xywh2xyxy(xywh.reshape({-1, 4})).view({bs, k, 4}),
                                      conf.unsqueeze(-1), cls.unsqueeze(-1)},
                                     -1)
                              .cpu();
  keep = keep.cpu();
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < bs; ++i) {
    out.push_back(rows[i].index_select(0, keep[i].nonzero().view(-1)));
  }
  return out;
}

std::vector<at::Tensor> non_max_suppression(const at::Tensor& prediction, const NmsOptions& opt) {
  if (opt.end2end) return topk_detections(prediction, opt);
  check_thresholds(opt);
  torch::NoGradGuard no_grad;
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
    at::Tensor order =
        opt.stable_ties ? std::get<1>(x.select(1, 4).sort(/*stable=*/true, 0, /*descending=*/true))
                        : x.select(1, 4).argsort(0, /*descending=*/true);
    if (n > kMaxNms) order = order.slice(0, 0, kMaxNms);
    x = x.index({order});
    // In float32: float16's largest value (65504) is below class 9's offset.
    const at::Tensor offset = x.slice(1, 5, 6).to(torch::kFloat) * (opt.agnostic ? 0.0 : kMaxWh);
    // With stable ties nms() gets the ranks as scores, so that its own sort keeps this order.
    const at::Tensor scores = opt.stable_ties
                                  ? -torch::arange(x.size(0), x.options().dtype(torch::kFloat))
                                  : x.select(1, 4);
    const at::Tensor keep =
        nms(x.slice(1, 0, 4).to(torch::kFloat) + offset, scores, opt.iou_thres, opt.max_det);
    output[xi] = x.index({keep});
  }
  return output;
}

BatchDetections non_max_suppression_batched(const at::Tensor& prediction, const NmsOptions& opt,
                                            bool device_schedule) {
  torch::NoGradGuard no_grad;
  // On the CPU, reading values costs nothing: the per-image pass scans only the candidates it
  // needs, where the device's schedule does max_det rounds over all of them.
  if (opt.end2end || (prediction.device().is_cpu() && !device_schedule)) {
    return pack(non_max_suppression(prediction, opt));
  }
  check_thresholds(opt);
  const Candidates c = chunked_candidates(prediction, opt);
  const at::Tensor keep = greedy_keep(c, opt);
  const int64_t bs = keep.size(0), r = keep.size(1);
  const at::Tensor pos = keep.clamp_min(0);
  const at::Tensor rows = torch::cat({c.boxes.gather(1, pos.unsqueeze(2).expand({bs, r, 4})),
                                      c.conf.gather(1, pos).masked_fill(keep < 0, -1).unsqueeze(2),
                                      c.cls.gather(1, pos).unsqueeze(2)},
                                     2);
  BatchDetections d;
  d.kept = rows.to(torch::kCPU).contiguous();  // the one copy from the device
  // Kept rows are a prefix of each image's (a kept conf exceeds conf_thres >= 0; padding is -1).
  const auto a = d.kept.accessor<float, 3>();
  d.counts.assign(static_cast<size_t>(bs), 0);
  for (int64_t i = 0; i < bs; ++i) {
    int64_t n = 0;
    while (n < r && a[i][n][4] >= 0) ++n;
    d.counts[static_cast<size_t>(i)] = n;
  }
  return d;
}

}  // namespace yolo

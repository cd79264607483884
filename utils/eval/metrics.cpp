#include "utils/eval/metrics.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "utils/eval/boxes.h"

namespace yolo {

namespace {

// numpy.interp for ascending xp (ties allowed), with values outside taken from left/right.
double interp(double x, const std::vector<double>& xp, const std::vector<double>& fp, double left,
              double right) {
  if (xp.empty()) return left;
  if (x < xp.front()) return left;
  if (x > xp.back()) return right;
  if (x == xp.back()) return fp.back();
  const size_t j = std::upper_bound(xp.begin(), xp.end(), x) - xp.begin() - 1;
  const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
  return fp[j] + slope * (x - xp[j]);
}

std::vector<double> linspace(double a, double b, int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = a + (b - a) * i / (n - 1);
  return v;
}

// YOLOv5's smooth(): box filter of fraction f, padded with the end values.
std::vector<double> smooth(const std::vector<double>& y, double f) {
  const int nf = static_cast<int>(std::nearbyint(y.size() * f * 2)) / 2 + 1;
  const int half = nf / 2;
  std::vector<double> padded(half, y.front());
  padded.insert(padded.end(), y.begin(), y.end());
  padded.insert(padded.end(), half, y.back());
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    double s = 0;
    for (int k = 0; k < nf; ++k) s += padded[i + k];
    out[i] = s / nf;
  }
  return out;
}

// Rows of (label, detection, iou) matched one-to-one as YOLOv5 does with numpy.unique: sorted by
// IoU, one row per detection (its best label); then, in detection order (re-sorted by IoU only
// for the confusion matrix), one row per label.
std::vector<std::array<double, 3>> one_to_one(std::vector<std::array<double, 3>> m,
                                              bool resort_between) {
  auto by_iou = [](const auto& a, const auto& b) { return a[2] > b[2]; };
  std::stable_sort(m.begin(), m.end(), by_iou);
  std::map<int, std::array<double, 3>> by_det;
  for (const auto& r : m) by_det.emplace(static_cast<int>(r[1]), r);
  std::vector<std::array<double, 3>> m2;
  for (const auto& kv : by_det) m2.push_back(kv.second);
  if (resort_between) std::stable_sort(m2.begin(), m2.end(), by_iou);
  std::map<int, std::array<double, 3>> by_label;
  for (const auto& r : m2) by_label.emplace(static_cast<int>(r[0]), r);
  std::vector<std::array<double, 3>> out;
  for (const auto& kv : by_label) out.push_back(kv.second);
  return out;
}

}  // namespace

std::vector<double> iou_thresholds() { return linspace(0.5, 0.95, 10); }

at::Tensor match_predictions(const at::Tensor& detections, const at::Tensor& labels,
                             const std::vector<double>& iouv) {
  const int64_t n = detections.size(0);
  at::Tensor correct = torch::zeros({n, static_cast<int64_t>(iouv.size())}, torch::kBool);
  if (n == 0 || labels.size(0) == 0) return correct;
  const at::Tensor iou = box_iou(labels.slice(1, 1, 5), detections.slice(1, 0, 4)).cpu();
  const at::Tensor same_class = (labels.slice(1, 0, 1) == detections.select(1, 5)).cpu();
  auto acc = correct.accessor<bool, 2>();
  for (size_t t = 0; t < iouv.size(); ++t) {
    const at::Tensor idx = ((iou >= iouv[t]) & same_class).nonzero();
    if (idx.size(0) == 0) continue;
    std::vector<std::array<double, 3>> m;
    auto ia = idx.accessor<int64_t, 2>();
    for (int64_t k = 0; k < idx.size(0); ++k) {
      m.push_back({static_cast<double>(ia[k][0]), static_cast<double>(ia[k][1]),
                   iou[ia[k][0]][ia[k][1]].item<double>()});
    }
    if (m.size() > 1) m = one_to_one(std::move(m), /*resort_between=*/false);
    for (const auto& r : m) acc[static_cast<int64_t>(r[1])][t] = true;
  }
  return correct.to(detections.device());
}

double compute_ap(const std::vector<double>& recall, const std::vector<double>& precision,
                  std::vector<double>* pr_curve_px, ApTail tail) {
  std::vector<double> mrec{0.0}, mpre{1.0};
  mrec.insert(mrec.end(), recall.begin(), recall.end());
  mpre.insert(mpre.end(), precision.begin(), precision.end());
  if (tail == ApTail::kUltralytics) {
    mrec.push_back(recall.empty() ? 1.0 : recall.back());
    mpre.push_back(0.0);
  }
  mrec.push_back(1.0);
  mpre.push_back(0.0);
  for (size_t i = mpre.size() - 1; i > 0; --i) mpre[i - 1] = std::max(mpre[i - 1], mpre[i]);
  const std::vector<double> x = linspace(0, 1, 101);
  double ap = 0, prev = interp(x[0], mrec, mpre, mpre.front(), mpre.back());
  for (size_t i = 1; i < x.size(); ++i) {
    const double cur = interp(x[i], mrec, mpre, mpre.front(), mpre.back());
    ap += (x[i] - x[i - 1]) * (cur + prev) / 2;  // trapezoid rule, as np.trapz
    prev = cur;
  }
  if (pr_curve_px) {
    const std::vector<double> px = linspace(0, 1, 1000);
    pr_curve_px->resize(px.size());
    for (size_t i = 0; i < px.size(); ++i) {
      (*pr_curve_px)[i] = interp(px[i], mrec, mpre, mpre.front(), mpre.back());
    }
  }
  return ap;
}

double ApResult::ap_mean(size_t k) const {
  return std::accumulate(ap[k].begin(), ap[k].end(), 0.0) / ap[k].size();
}

ApResult ap_per_class(const std::vector<std::vector<bool>>& tp, const std::vector<double>& conf,
                      const std::vector<int>& pred_cls, const std::vector<int>& target_cls,
                      ApTail tail) {
  constexpr double eps = 1e-16;
  const size_t niou = tp.empty() ? iou_thresholds().size() : tp[0].size();
  std::vector<size_t> order(conf.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return conf[a] > conf[b]; });

  std::map<int, int> counts;
  for (int c : target_cls) ++counts[c];
  ApResult res;
  res.px = linspace(0, 1, 1000);
  const size_t npx = res.px.size();
  for (const auto& kv : counts) res.classes.push_back(kv.first);
  const size_t nc = res.classes.size();
  res.ap.assign(nc, std::vector<double>(niou, 0.0));
  res.p_curve.assign(nc, std::vector<double>(npx, 0.0));
  res.r_curve.assign(nc, std::vector<double>(npx, 0.0));
  res.pr_curve.assign(nc, std::vector<double>(npx, 0.0));

  for (size_t ci = 0; ci < nc; ++ci) {
    const int c = res.classes[ci];
    const double n_l = counts[c];
    std::vector<size_t> idx;
    for (size_t k : order) {
      if (pred_cls[k] == c) idx.push_back(k);
    }
    if (idx.empty() || n_l == 0) continue;
    std::vector<double> neg_conf;
    for (size_t k : idx) neg_conf.push_back(-conf[k]);
    for (size_t j = 0; j < niou; ++j) {
      std::vector<double> recall(idx.size()), precision(idx.size());
      double tpc = 0, fpc = 0;
      for (size_t q = 0; q < idx.size(); ++q) {
        tp[idx[q]][j] ? ++tpc : ++fpc;
        recall[q] = tpc / (n_l + eps);
        precision[q] = tpc / (tpc + fpc);
      }
      if (j == 0) {
        for (size_t q = 0; q < npx; ++q) {
          res.r_curve[ci][q] = interp(-res.px[q], neg_conf, recall, 0.0, recall.back());
          res.p_curve[ci][q] = interp(-res.px[q], neg_conf, precision, 1.0, precision.back());
        }
      }
      res.ap[ci][j] = compute_ap(recall, precision, j == 0 ? &res.pr_curve[ci] : nullptr, tail);
    }
  }
  res.f1_curve.assign(nc, std::vector<double>(npx, 0.0));
  std::vector<double> mean_f1(npx, 0.0);
  for (size_t ci = 0; ci < nc; ++ci) {
    for (size_t q = 0; q < npx; ++q) {
      const double p = res.p_curve[ci][q], r = res.r_curve[ci][q];
      res.f1_curve[ci][q] = 2 * p * r / (p + r + eps);
      mean_f1[q] += res.f1_curve[ci][q] / nc;
    }
  }
  if (nc == 0) return res;
  const std::vector<double> sm = smooth(mean_f1, 0.1);
  const size_t best = std::max_element(sm.begin(), sm.end()) - sm.begin();
  for (size_t ci = 0; ci < nc; ++ci) {
    const double p = res.p_curve[ci][best], r = res.r_curve[ci][best];
    res.p.push_back(p);
    res.r.push_back(r);
    res.f1.push_back(res.f1_curve[ci][best]);
    const double tpv = std::nearbyint(r * counts[res.classes[ci]]);
    res.tp.push_back(tpv);
    res.fp.push_back(std::nearbyint(tpv / (p + eps) - tpv));
  }
  for (size_t ci = 0; ci < nc; ++ci) {
    res.mp += res.p[ci] / nc;
    res.mr += res.r[ci] / nc;
    res.map50 += res.ap[ci][0] / nc;
    res.map += res.ap_mean(ci) / nc;
  }
  return res;
}

double fitness(double map50, double map, double map50_weight) {
  return map50_weight * map50 + (1 - map50_weight) * map;
}

ConfusionMatrix::ConfusionMatrix(int nc, double conf, double iou_thres)
    : nc_(nc), conf_(conf), iou_(iou_thres), m_(nc + 1, std::vector<double>(nc + 1, 0.0)) {}

void ConfusionMatrix::process_batch(const at::Tensor& detections_in, const at::Tensor& labels_in) {
  const at::Tensor labels = labels_in.cpu();
  if (!detections_in.defined()) {
    for (int64_t i = 0; i < labels.size(0); ++i) m_[nc_][labels[i][0].item<int>()] += 1;
    return;
  }
  const at::Tensor det = detections_in.cpu().index({detections_in.cpu().select(1, 4) > conf_});
  const int64_t nl = labels.size(0), nd = det.size(0);
  std::vector<std::array<double, 3>> matches;
  if (nl && nd) {
    const at::Tensor iou = box_iou(labels.slice(1, 1, 5), det.slice(1, 0, 4));
    const at::Tensor idx = (iou > iou_).nonzero();
    auto ia = idx.accessor<int64_t, 2>();
    for (int64_t k = 0; k < idx.size(0); ++k) {
      matches.push_back({static_cast<double>(ia[k][0]), static_cast<double>(ia[k][1]),
                         iou[ia[k][0]][ia[k][1]].item<double>()});
    }
    if (matches.size() > 1) matches = one_to_one(std::move(matches), /*resort_between=*/true);
  }
  std::vector<int> det_cls(nd);
  for (int64_t j = 0; j < nd; ++j) det_cls[j] = det[j][5].item<int>();
  for (int64_t i = 0; i < nl; ++i) {
    const int gc = labels[i][0].item<int>();
    int found = -1, count = 0;
    for (const auto& m : matches) {
      if (static_cast<int64_t>(m[0]) == i) {
        found = static_cast<int>(m[1]);
        ++count;
      }
    }
    if (count == 1) {
      m_[det_cls[found]][gc] += 1;  // correct or confused class
    } else {
      m_[nc_][gc] += 1;  // missed: background
    }
  }
  for (int64_t j = 0; j < nd; ++j) {
    const bool matched = std::any_of(matches.begin(), matches.end(), [&](const auto& m) {
      return static_cast<int64_t>(m[1]) == j;
    });
    if (!matched) m_[det_cls[j]][nc_] += 1;  // predicted background
  }
}

}  // namespace yolo

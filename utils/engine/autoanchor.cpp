#include "utils/engine/autoanchor.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>

#include "utils/core/format.h"
#include "utils/core/log.h"

namespace yolo {
namespace {

using Wh = std::array<double, 2>;
const char* const kPrefix = "AutoAnchor: ";

// Own uniform/normal draws on mt19937_64: the standard distributions are implementation-defined,
// and anchors must not change with the standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform() { return (gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = 0;
    while (u1 <= 0) u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2 * M_PI * u2);
  }
  size_t below(size_t n) { return std::min(n - 1, static_cast<size_t>(uniform() * n)); }

 private:
  std::mt19937_64 gen_;
  bool has_spare_ = false;
  double spare_ = 0;
};

// (n, 2) tensor -> rows; `what` names the argument in errors.
std::vector<Wh> to_rows(const at::Tensor& t, const char* what) {
  if (!t.defined() || t.dim() != 2 || t.size(1) != 2) {
    std::string shape = "undefined";
    if (t.defined()) {
      shape = "[";
      for (int64_t d = 0; d < t.dim(); ++d) shape += (d ? ", " : "") + std::to_string(t.size(d));
      shape += "]";
    }
    throw std::invalid_argument(std::string(what) + " must be an (n, 2) tensor of widths and " +
                                "heights, got shape " + shape);
  }
  const at::Tensor c = t.detach().to(at::kCPU, at::kDouble).contiguous();
  const double* d = c.data_ptr<double>();
  std::vector<Wh> rows(c.size(0));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = {d[2 * i], d[2 * i + 1]};
  return rows;
}

at::Tensor to_tensor(const std::vector<Wh>& k) {
  at::Tensor t = at::empty({static_cast<int64_t>(k.size()), 2}, at::kFloat);
  float* d = t.data_ptr<float>();
  for (size_t i = 0; i < k.size(); ++i) d[2 * i] = k[i][0], d[2 * i + 1] = k[i][1];
  return t;
}

// min(r, 1/r) over width and height for r = box / anchor: 1 for a perfect fit.
inline float ratio_metric(float w, float h, float kw, float kh) {
  const float rw = w / kw, rh = h / kh;
  return std::min(std::min(rw, 1.0f / rw), std::min(rh, 1.0f / rh));
}

// Sum over points of f(best, count above thr), in fixed-size blocks summed in order so the result
// does not depend on the number of threads.
template <typename F>
double blocked_sum(const std::vector<Wh>& wh, const std::vector<Wh>& k, double thr_inv, F f) {
  constexpr int64_t kBlock = 4096;
  const int64_t n = wh.size(), nb = (n + kBlock - 1) / kBlock;
  std::vector<float> kw(k.size()), kh(k.size());
  for (size_t j = 0; j < k.size(); ++j) kw[j] = k[j][0], kh[j] = k[j][1];
  std::vector<double> partial(nb, 0.0);
  at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double s = 0;
      for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        const float w = wh[i][0], h = wh[i][1];
        float best = 0;
        int above = 0;
        for (size_t j = 0; j < kw.size(); ++j) {
          const float x = ratio_metric(w, h, kw[j], kh[j]);
          best = std::max(best, x);
          above += x > thr_inv;
        }
        s += f(best, above);
      }
      partial[b] = s;
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

// YOLOv5's anchor_fitness: mean of best * (best > 1/thr).
double fitness(const std::vector<Wh>& wh, const std::vector<Wh>& k, double thr_inv) {
  if (wh.empty()) return 0;
  const double s =
      blocked_sum(wh, k, thr_inv, [&](float best, int) { return best > thr_inv ? best : 0.0f; });
  return s / wh.size();
}

AnchorFit fit_of(const std::vector<Wh>& wh, const std::vector<Wh>& k, double thr) {
  if (wh.empty() || k.empty()) return {0, 0};
  const double inv = 1.0 / thr;
  const double bpr =
      blocked_sum(wh, k, inv, [&](float best, int) { return best > inv ? 1.0 : 0.0; });
  const double aat = blocked_sum(wh, k, inv, [](float, int above) { return double(above); });
  return {bpr / wh.size(), aat / wh.size()};
}

// One scipy _kmeans run from `codes`: Lloyd iterations until the mean distortion changes by at
// most `thresh`; clusters left without points are dropped. Returns the mean distortion.
double lloyd(const std::vector<Wh>& obs, std::vector<Wh>* codes, double thresh) {
  constexpr int64_t kBlock = 8192;
  const int64_t n = obs.size(), nb = (n + kBlock - 1) / kBlock;
  double prev = std::numeric_limits<double>::infinity(), avg = prev;
  for (int iter = 0; iter < 1000; ++iter) {  // the cap only guards against float ping-pong
    const size_t k = codes->size();
    std::vector<std::vector<double>> sums(nb, std::vector<double>(3 * k, 0.0));
    std::vector<double> dist(nb, 0.0);
    at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
          size_t best = 0;
          double bd = std::numeric_limits<double>::infinity();
          for (size_t j = 0; j < k; ++j) {
            const double dx = obs[i][0] - (*codes)[j][0], dy = obs[i][1] - (*codes)[j][1];
            const double d = dx * dx + dy * dy;
            if (d < bd) bd = d, best = j;
          }
          dist[b] += std::sqrt(bd);
          sums[b][3 * best] += obs[i][0];
          sums[b][3 * best + 1] += obs[i][1];
          sums[b][3 * best + 2] += 1;
        }
      }
    });
    double total = 0;
    std::vector<double> s(3 * k, 0.0);
    for (int64_t b = 0; b < nb; ++b) {
      total += dist[b];
      for (size_t j = 0; j < 3 * k; ++j) s[j] += sums[b][j];
    }
    prev = avg;
    avg = total / n;
    std::vector<Wh> next;
    for (size_t j = 0; j < k; ++j) {
      if (s[3 * j + 2] > 0) next.push_back({s[3 * j] / s[3 * j + 2], s[3 * j + 1] / s[3 * j + 2]});
    }
    *codes = std::move(next);
    if (!(std::abs(prev - avg) > thresh)) break;
  }
  return avg;
}

// scipy.cluster.vq.kmeans(obs, k, iter): `iter` runs from k distinct random observations, the
// codebook with the lowest mean distortion wins (it may have fewer than k codes).
std::vector<Wh> scipy_kmeans(const std::vector<Wh>& obs, size_t k, int iter, Rng& rng) {
  std::vector<Wh> best_codes;
  double best = std::numeric_limits<double>::infinity();
  for (int it = 0; it < iter; ++it) {
    // Floyd's sampling of k distinct indices.
    std::vector<size_t> idx;
    for (size_t j = obs.size() - k; j < obs.size(); ++j) {
      const size_t t = rng.below(j + 1);
      idx.push_back(std::find(idx.begin(), idx.end(), t) == idx.end() ? t : j);
    }
    std::vector<Wh> codes;
    for (size_t i : idx) codes.push_back(obs[i]);
    const double d = lloyd(obs, &codes, 1e-5);
    if (d < best) best = d, best_codes = codes;
  }
  return best_codes;
}

void sort_by_area(std::vector<Wh>* k) {
  std::stable_sort(k->begin(), k->end(),
                   [](const Wh& a, const Wh& b) { return a[0] * a[1] < b[0] * b[1]; });
}

struct Note {
  bool warning;
  std::string text;
};

// kmean_anchors without logging: the notes go to the caller, who logs them or adds them to a
// message in order.
std::vector<Wh> kmean_impl(const std::vector<Wh>& wh_all, int n, int img_size, double thr, int gen,
                           uint64_t seed, std::vector<Note>* notes) {
  if (n < 1) throw std::invalid_argument("kmean_anchors: n must be >= 1, got " + std::to_string(n));
  const double thr_inv = 1.0 / thr;
  Rng rng(seed);

  std::vector<Wh> wh0, wh;  // wh0: every finite box; wh: those >= 2 px on some side
  size_t tiny = 0;
  for (const Wh& b : wh_all) {
    if (!std::isfinite(b[0]) || !std::isfinite(b[1]) || b[0] < 0 || b[1] < 0) continue;
    wh0.push_back(b);
    tiny += b[0] < 3.0 || b[1] < 3.0;
    if (b[0] >= 2.0 || b[1] >= 2.0) wh.push_back(b);
  }
  if (tiny) {
    notes->push_back({true, std::string(kPrefix) +
                                "Extremely small objects found: " + std::to_string(tiny) + " of " +
                                std::to_string(wh0.size()) + " labels are <3 pixels in size"});
  }
  notes->push_back({false, std::string(kPrefix) + "Running kmeans for " + std::to_string(n) +
                               " anchors on " + std::to_string(wh.size()) + " points..."});

  // k-means on whitened sizes; it needs at least n points with some spread.
  std::vector<Wh> k;
  Wh sd = {0, 0};
  if (static_cast<size_t>(n) <= wh.size()) {
    for (int c = 0; c < 2; ++c) {
      double mean = 0, var = 0;
      for (const Wh& b : wh) mean += b[c] / wh.size();
      for (const Wh& b : wh) var += (b[c] - mean) * (b[c] - mean) / wh.size();
      sd[c] = std::sqrt(var);
    }
    if (sd[0] > 0 && sd[1] > 0) {
      std::vector<Wh> obs(wh.size());
      for (size_t i = 0; i < wh.size(); ++i) obs[i] = {wh[i][0] / sd[0], wh[i][1] / sd[1]};
      k = scipy_kmeans(obs, n, 30, rng);
      for (Wh& c : k) c = {c[0] * sd[0], c[1] * sd[1]};
    }
  }
  if (k.size() != static_cast<size_t>(n)) {
    notes->push_back(
        {true, std::string(kPrefix) + "switching strategies from kmeans to random init"});
    std::vector<double> u(2 * n);
    for (double& v : u) v = rng.uniform();
    std::sort(u.begin(), u.end());
    k.assign(n, {0, 0});
    for (int i = 0; i < n; ++i) k[i] = {u[2 * i] * img_size, u[2 * i + 1] * img_size};
  }
  sort_by_area(&k);

  // Genetic evolution: mutate every gene with probability 0.9, keep improvements only.
  if (!wh.empty()) {
    const double mp = 0.9, sigma = 0.1;
    double f = fitness(wh, k, thr_inv);
    std::vector<double> v(2 * n);
    for (int g = 0; g < gen; ++g) {
      bool changed = false;
      while (!changed) {  // mutate until a change occurs (no duplicate evaluations)
        std::vector<bool> mask(2 * n);
        for (int i = 0; i < 2 * n; ++i) mask[i] = rng.uniform() < mp;
        const double r = rng.uniform();
        for (int i = 0; i < 2 * n; ++i) {
          v[i] = std::clamp((mask[i] ? 1.0 : 0.0) * r * rng.normal() * sigma + 1.0, 0.3, 3.0);
          changed |= v[i] != 1.0;
        }
      }
      std::vector<Wh> kg(k);
      for (int i = 0; i < n; ++i) {
        kg[i] = {std::max(2.0, k[i][0] * v[2 * i]), std::max(2.0, k[i][1] * v[2 * i + 1])};
      }
      const double fg = fitness(wh, kg, thr_inv);
      if (fg > f) f = fg, k = std::move(kg);
    }
  }
  sort_by_area(&k);

  // YOLOv5's print_results, on all boxes.
  const AnchorFit fit = fit_of(wh0, k, thr);
  std::string s = std::string(kPrefix) + "thr=" + format_number("%.2f", thr_inv) + ": " +
                  format_number("%.4f", fit.bpr) + " best possible recall, " +
                  format_number("%.2f", fit.aat) + " anchors past thr\n" + kPrefix +
                  "n=" + std::to_string(n) + ", img_size=" + std::to_string(img_size) +
                  ", anchors: ";
  for (size_t i = 0; i < k.size(); ++i) {
    s += std::to_string(std::lround(k[i][0])) + "," + std::to_string(std::lround(k[i][1])) +
         (i + 1 < k.size() ? ",  " : "");
  }
  notes->push_back({false, s});
  return k;
}

}  // namespace

AnchorFit anchor_metric(const at::Tensor& anchors_px, const at::Tensor& wh, double thr) {
  return fit_of(to_rows(wh, "anchor_metric: wh"), to_rows(anchors_px, "anchor_metric: anchors"),
                thr);
}

at::Tensor kmean_anchors(const at::Tensor& wh, int n, int img_size, double thr, int gen,
                         uint64_t seed) {
  std::vector<Note> notes;
  const std::vector<Wh> k =
      kmean_impl(to_rows(wh, "kmean_anchors: wh"), n, img_size, thr, gen, seed, &notes);
  for (const Note& note : notes) note.warning ? log_warn(note.text) : log_info(note.text);
  return to_tensor(k);
}

AutoAnchorResult check_anchors(const std::vector<std::array<float, 2>>& image_wh,
                               const std::vector<std::vector<std::array<float, 2>>>& labels_wh,
                               const at::Tensor& anchors_px, const std::vector<int>& strides,
                               double thr, int imgsz, uint64_t seed) {
  if (!anchors_px.defined() || anchors_px.dim() != 3 || anchors_px.size(2) != 2) {
    throw std::invalid_argument("check_anchors: anchors must be an (nl, na, 2) tensor");
  }
  const int64_t nl = anchors_px.size(0), na = anchors_px.size(1);
  if (static_cast<int64_t>(strides.size()) != nl) {
    throw std::invalid_argument("check_anchors: " + std::to_string(strides.size()) +
                                " strides for " + std::to_string(nl) + " anchor layers");
  }
  if (image_wh.size() != labels_wh.size()) {
    throw std::invalid_argument("check_anchors: " + std::to_string(image_wh.size()) +
                                " image sizes for " + std::to_string(labels_wh.size()) +
                                " label lists");
  }
  AutoAnchorResult res;
  res.anchors_px = anchors_px.clone();

  // Boxes at training size: wh0 as kmean_anchors sees them, wh with the random scale (the
  // augmentation range) for the fit, one draw per image as YOLOv5.
  Rng rng(seed);
  std::vector<Wh> wh0, wh;
  for (size_t i = 0; i < image_wh.size(); ++i) {
    const double w = image_wh[i][0], h = image_wh[i][1];
    if (!(w > 0) || !(h > 0) || !std::isfinite(w) || !std::isfinite(h)) {
      throw std::invalid_argument("check_anchors: image " + std::to_string(i) + " has size " +
                                  format_number("%g", w) + "x" + format_number("%g", h));
    }
    const double m = std::max(w, h);
    const Wh shape = {imgsz * w / m, imgsz * h / m};
    const double scale = 0.9 + 0.2 * rng.uniform();
    for (const auto& l : labels_wh[i]) {
      if (!std::isfinite(l[0]) || !std::isfinite(l[1])) continue;
      wh0.push_back({l[0] * shape[0], l[1] * shape[1]});
      wh.push_back({l[0] * shape[0] * scale, l[1] * shape[1] * scale});
    }
  }
  if (wh.empty()) {
    res.message = std::string(kPrefix) + "no labels to fit, anchors left unchanged";
    return res;
  }

  const std::vector<Wh> current = to_rows(anchors_px.reshape({-1, 2}), "check_anchors: anchors");
  const AnchorFit fit = fit_of(wh, current, thr);
  res.bpr_before = res.bpr_after = fit.bpr;
  std::string s = std::string(kPrefix) + format_number("%.2f", fit.aat) + " anchors/target, " +
                  format_number("%.3f", fit.bpr) + " Best Possible Recall (BPR). ";
  if (fit.bpr > 0.98) {
    res.message = s + "Current anchors are a good fit to dataset OK";
    return res;
  }
  s += "Anchors are a poor fit to dataset WARNING, attempting to improve...";
  std::vector<Note> notes;
  // A different stream from the scale draws, still fixed by `seed`.
  std::vector<Wh> k = kmean_impl(wh0, static_cast<int>(nl * na), imgsz, thr, 1000,
                                 seed ^ 0x9E3779B97F4A7C15ULL, &notes);
  for (const Note& note : notes)
    s += "\n" + std::string(note.warning ? "WARNING: " : "") + note.text;
  const double new_bpr = fit_of(wh, k, thr).bpr;
  if (new_bpr > fit.bpr) {
    at::Tensor a = to_tensor(k).view({nl, na, 2});
    // check_anchor_order: layers' mean anchor area must grow with the stride.
    const at::Tensor area = a.prod(-1).mean(-1);
    const double da = (area[-1] - area[0]).item<double>();
    const double ds = strides.back() - strides.front();
    if (da != 0 && ds != 0 && (da > 0) != (ds > 0)) a = a.flip(0);
    res.anchors_px = a.to(anchors_px.options());
    res.replaced = true;
    res.bpr_after = new_bpr;
    s += "\n" + std::string(kPrefix) + "Done OK, new BPR " + format_number("%.3f", new_bpr) +
         " (optional: update model *.yaml to use these anchors in the future)";
  } else {
    s += "\n" + std::string(kPrefix) +
         "Done WARNING (original anchors better than new anchors, proceeding with original "
         "anchors)";
  }
  res.message = s;
  return res;
}

}  // namespace yolo

#include "utils/eval/coco_eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

#include "utils/core/format.h"
#include "utils/eval/json.h"

namespace yolo {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// pycocotools sorts image ids: numbers numerically, strings as strings.
bool image_key_less(const std::string& a, const std::string& b) {
  const bool na = all_digits(a), nb = all_digits(b);
  if (na && nb) return std::stoll(a) < std::stoll(b);
  if (na != nb) return na;
  return a < b;
}

constexpr int kT = 10;   // IoU thresholds .50:.05:.95
constexpr int kR = 101;  // recall thresholds 0:.01:1
constexpr std::array<int, 3> kMaxDets = {1, 10, 100};
constexpr std::array<std::array<double, 2>, 4> kAreas = {
    {{0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}}};  // all, small, medium, large

// np.linspace's values, bit for bit (t * step + start, the last one exactly the end), as
// pycocotools compares IoUs and recalls against them.
double iou_threshold(int t) { return t == kT - 1 ? 0.95 : t * ((0.95 - 0.5) / (kT - 1)) + 0.5; }
double recall_threshold(int r) { return r == kR - 1 ? 1.0 : r * (1.0 / (kR - 1)); }

double box_iou(const CocoBox& d, const CocoBox& g) {
  const double w = std::min(d.x + d.w, g.x + g.w) - std::max(d.x, g.x);
  const double h = std::min(d.y + d.h, g.y + g.h) - std::max(d.y, g.y);
  if (w <= 0 || h <= 0) return 0;
  const double inter = w * h;
  const double uni = g.iscrowd ? d.w * d.h : d.w * d.h + g.w * g.h - inter;
  return uni > 0 ? inter / uni : 0;
}

// evaluateImg's result for one image, category and area range.
struct ImageEval {
  std::vector<double> scores;                          // detections by score, at most 100
  std::vector<std::array<bool, kT>> matched, ignored;  // per detection, per IoU threshold
  int gt_counted = 0;                                  // ground truth not ignored
};

// One image and category: its ground truth, its detections by score (stable, at most 100) and
// their IoUs, computed once for all area ranges (computeIoU).
struct ImagePair {
  std::vector<const CocoBox*> gt, dt;
  std::vector<std::vector<double>> ious;  // [detection][ground truth]
};

ImagePair pair_up(const std::vector<const CocoBox*>& gt, const std::vector<const CocoBox*>& dt) {
  ImagePair p{gt, dt, {}};
  std::stable_sort(p.dt.begin(), p.dt.end(),
                   [](const CocoBox* a, const CocoBox* b) { return a->score > b->score; });
  if (p.dt.size() > static_cast<size_t>(kMaxDets.back())) p.dt.resize(kMaxDets.back());
  p.ious.assign(p.dt.size(), std::vector<double>(p.gt.size()));
  for (size_t i = 0; i < p.dt.size(); ++i) {
    for (size_t j = 0; j < p.gt.size(); ++j) p.ious[i][j] = box_iou(*p.dt[i], *p.gt[j]);
  }
  return p;
}

// evaluateImg for one area range.
ImageEval evaluate_image(const ImagePair& p, const std::array<double, 2>& rng) {
  auto ignore = [&](const CocoBox* g) {
    return g->iscrowd || g->area < rng[0] || g->area > rng[1];
  };
  // Ground truth not ignored first (stable); gt[j] is p.gt[order[j]].
  std::vector<size_t> order(p.gt.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return !ignore(p.gt[a]) && ignore(p.gt[b]); });
  std::vector<const CocoBox*> gt;
  for (size_t j : order) gt.push_back(p.gt[j]);
  const std::vector<const CocoBox*>& dt = p.dt;

  ImageEval e;
  for (const CocoBox* g : gt) e.gt_counted += ignore(g) ? 0 : 1;
  e.matched.assign(dt.size(), {});
  e.ignored.assign(dt.size(), {});
  for (const CocoBox* d : dt) e.scores.push_back(d->score);
  for (int t = 0; t < kT; ++t) {
    std::vector<bool> gt_taken(gt.size(), false);
    for (size_t i = 0; i < dt.size(); ++i) {
      double best = std::min(iou_threshold(t), 1 - 1e-10);
      int m = -1;
      for (size_t j = 0; j < gt.size(); ++j) {
        if (gt_taken[j] && !gt[j]->iscrowd) continue;
        // Once matched to counted ground truth, ignored ground truth (sorted last) cannot win.
        if (m > -1 && !ignore(gt[m]) && ignore(gt[j])) break;
        const double iou = p.ious[i][order[j]];
        if (iou < best) continue;
        best = iou;
        m = static_cast<int>(j);
      }
      if (m == -1) {
        const double a = dt[i]->w * dt[i]->h;  // loadRes' area for a box result
        e.ignored[i][t] = a < rng[0] || a > rng[1];
        continue;
      }
      e.ignored[i][t] = ignore(gt[m]);
      e.matched[i][t] = true;
      gt_taken[m] = true;
    }
  }
  return e;
}

// accumulate() for one category, area range and detection limit: the 101-point precision per IoU
// threshold (empty when no ground truth counts) and the final recall.
struct Curve {
  bool valid = false;
  std::array<std::array<double, kR>, kT> precision{};
  std::array<double, kT> recall{};
};

Curve accumulate(const std::vector<const ImageEval*>& evals, int max_det) {
  Curve c;
  std::vector<double> scores;
  std::vector<std::pair<const ImageEval*, int>> refs;
  int npig = 0;
  for (const ImageEval* e : evals) {
    const int n = std::min<int>(max_det, static_cast<int>(e->scores.size()));
    for (int i = 0; i < n; ++i) {
      scores.push_back(e->scores[i]);
      refs.emplace_back(e, i);
    }
    npig += e->gt_counted;
  }
  if (npig == 0) return c;
  c.valid = true;
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  const double eps = std::numeric_limits<double>::epsilon();  // np.spacing(1)
  for (int t = 0; t < kT; ++t) {
    std::vector<double> rc, pr;
    double tp = 0, fp = 0;
    for (size_t k : order) {
      const auto& [e, i] = refs[k];
      if (e->ignored[i][t]) {
        // an ignored detection adds to neither sum, but keeps its place in the curve
      } else if (e->matched[i][t]) {
        tp += 1;
      } else {
        fp += 1;
      }
      rc.push_back(tp / npig);
      pr.push_back(tp / (fp + tp + eps));
    }
    c.recall[t] = rc.empty() ? 0 : rc.back();
    for (size_t i = pr.size(); i-- > 1;) pr[i - 1] = std::max(pr[i - 1], pr[i]);
    for (int r = 0; r < kR; ++r) {
      const auto it = std::lower_bound(rc.begin(), rc.end(), recall_threshold(r));
      if (it == rc.end()) break;  // precision stays 0 beyond the highest recall reached
      c.precision[t][r] = pr[static_cast<size_t>(it - rc.begin())];
    }
  }
  return c;
}

double mean_or_minus1(double sum, int n) { return n ? sum / n : -1; }

// `d` as an integer id; false when it is outside int64's range (or NaN), where a cast is undefined.
bool to_int64(double d, int64_t& out) {
  if (!(d >= -9.2e18 && d <= 9.2e18)) return false;
  out = static_cast<int64_t>(d);
  return true;
}

// Reads an image id, consuming the value: a number (as an integer key) or a string; false for
// other types and for numbers beyond int64.
bool read_image_id(json::value& v, std::string& out) {
  double d = 0;
  int64_t i = 0;
  if (json_number(v, d)) {
    if (!to_int64(d, i)) return false;
    out = std::to_string(i);
    return true;
  }
  if (v.type().value() == json::json_type::string) {
    out = coco_image_key(std::string(v.get_string().value()));
    return true;
  }
  json_skip(v);
  return false;
}

// One annotation, or with `score` one detection: members in any order; the others, such as
// segmentation, are checked as JSON and dropped. Errors name the item as `where()` says.
template <typename Where>
CocoBox read_box(json::value item, const Where& where, double* score) {
  CocoBox b;
  bool has_image = false, has_category = false, has_area = false, has_score = false;
  bool bbox_numbers = true;
  int bbox_size = -1;
  double number = 0;
  if (item.type().value() != json::json_type::object) {
    json_skip(item);
  } else {
    for (auto member : item.get_object()) {
      const std::string_view key = member.unescaped_key().value();
      json::value v = member.value().value();
      if (key == "image_id") {
        has_image = read_image_id(v, b.image_id);
      } else if (key == "category_id" && json_number(v, number)) {
        has_category = to_int64(number, b.category_id);
      } else if (key == "bbox" && v.type().value() == json::json_type::array) {
        double* dst[4] = {&b.x, &b.y, &b.w, &b.h};
        bbox_size = 0;
        for (auto e : v.get_array()) {
          json::value x = e.value();
          if (bbox_size < 4 && json_number(x, number)) {
            *dst[bbox_size] = number;
          } else {
            if (bbox_size < 4) bbox_numbers = false;
            json_skip(x);
          }
          ++bbox_size;
        }
      } else if (key == "area" && json_number(v, b.area)) {
        has_area = true;
      } else if (key == "iscrowd" && v.type().value() == json::json_type::boolean) {
        b.iscrowd = v.get_bool().value();
      } else if (key == "iscrowd" && json_number(v, number)) {
        b.iscrowd = number != 0;
      } else if (key == "id" && json_number(v, number)) {
        to_int64(number, b.id);  // beyond int64 it stays 0, as a missing id
      } else if (score && key == "score" && json_number(v, number)) {
        *score = number;
        has_score = true;
      } else {
        json_skip(v);
      }
    }
  }
  if (!has_image || !has_category || bbox_size != 4) {
    throw std::runtime_error(where() +
                             ": needs image_id, a numeric category_id and a 4-number bbox");
  }
  if (!bbox_numbers) throw std::runtime_error(where() + ": bbox values must be numbers");
  if (score && !has_score) throw std::runtime_error(where() + ": needs a numeric score");
  if (!has_area) b.area = b.w * b.h;
  return b;
}

// Calls `each(item, index)` for every item of the list `v`.
template <typename Fn>
void for_each_item(json::value& v, Fn&& each) {
  size_t i = 0;
  for (auto item : v.get_array()) each(item.value(), i++);
}

// Calls `read(value)` on the "id" member of an object, skipping the others; `read` consumes the
// value and says whether it took it. False when there is no id it took (or no object).
template <typename Read>
bool read_id(json::value item, Read&& read) {
  if (item.type().value() != json::json_type::object) {
    json_skip(item);
    return false;
  }
  bool found = false;
  for (auto member : item.get_object()) {
    const std::string_view key = member.unescaped_key().value();
    json::value v = member.value().value();
    if (key == "id") {
      found = read(v);
    } else {
      json_skip(v);
    }
  }
  return found;
}

}  // namespace

std::string coco_image_key(const std::string& stem_or_id) {
  return all_digits(stem_or_id) ? std::to_string(std::stoll(stem_or_id)) : stem_or_id;
}

std::string coco_image_id_json(const std::string& stem) {
  return all_digits(stem) ? coco_image_key(stem) : json_quote(stem);
}

CocoGroundTruth load_coco_ground_truth(const std::string& path) {
  CocoGroundTruth gt;
  gt.path = path;
  bool images = false, annotations = false, categories = false;
  const std::string not_coco = path +
                               ": not a COCO annotations file (needs 'images', 'annotations' and "
                               "'categories' lists)";
  read_json_file(path, [&](json::document& doc) {
    if (doc.type().value() != json::json_type::object) throw std::runtime_error(not_coco);
    for (auto member : doc.get_object()) {
      const std::string_view key = member.unescaped_key().value();
      json::value v = member.value().value();
      const bool list = v.type().value() == json::json_type::array;
      if (key == "images" && list) {
        images = true;
        for_each_item(v, [&](json::value item, size_t i) {
          std::string id;
          if (!read_id(item, [&](json::value& v) { return read_image_id(v, id); }))
            throw std::runtime_error(path + ": images[" + std::to_string(i) + "] has no id");
          gt.image_ids.push_back(id);
        });
      } else if (key == "annotations" && list) {
        annotations = true;
        for_each_item(v, [&](json::value item, size_t i) {
          const auto where = [&] { return path + ": annotations[" + std::to_string(i) + "]"; };
          gt.annotations.push_back(read_box(item, where, nullptr));
        });
      } else if (key == "categories" && list) {
        categories = true;
        for_each_item(v, [&](json::value item, size_t i) {
          int64_t id = 0;
          const auto numeric = [&](json::value& v) {
            double d = 0;
            if (json_number(v, d)) return to_int64(d, id);
            json_skip(v);
            return false;
          };
          if (!read_id(item, numeric)) {
            throw std::runtime_error(path + ": categories[" + std::to_string(i) +
                                     "] has no numeric id");
          }
          gt.category_ids.push_back(id);
        });
      } else {
        json_skip(v);
      }
    }
  });
  if (!images || !annotations || !categories) throw std::runtime_error(not_coco);
  return gt;
}

std::vector<CocoBox> load_coco_results(const std::string& path) {
  std::vector<CocoBox> out;
  read_json_file(path, [&](json::document& doc) {
    if (doc.type().value() != json::json_type::array)
      throw std::runtime_error(path + ": a COCO results file is a JSON list");
    json::value list = doc.get_value().value();
    for_each_item(list, [&](json::value item, size_t i) {
      double score = 0;
      const auto where = [&] { return path + ": entry " + std::to_string(i); };
      CocoBox b = read_box(item, where, &score);
      b.score = score;
      b.area = b.w * b.h;
      out.push_back(std::move(b));
    });
  });
  return out;
}

const std::vector<int>& coco80_to_coco91() {
  static const std::vector<int> map = {
      1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21,
      22, 23, 24, 25, 27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
      46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
      67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90};
  return map;
}

CocoStats coco_evaluate(const CocoGroundTruth& gt, const std::vector<CocoBox>& detections,
                        std::vector<std::string> image_ids) {
  if (image_ids.empty()) image_ids = gt.image_ids;
  for (auto& id : image_ids) id = coco_image_key(id);
  std::sort(image_ids.begin(), image_ids.end(), image_key_less);
  image_ids.erase(std::unique(image_ids.begin(), image_ids.end()), image_ids.end());
  std::vector<int64_t> cats = gt.category_ids;
  std::sort(cats.begin(), cats.end());
  cats.erase(std::unique(cats.begin(), cats.end()), cats.end());

  using Key = std::pair<std::string, int64_t>;
  std::map<Key, std::vector<const CocoBox*>> gts, dts;
  for (const CocoBox& b : gt.annotations) gts[{b.image_id, b.category_id}].push_back(&b);
  for (const CocoBox& b : detections) dts[{b.image_id, b.category_id}].push_back(&b);

  // evals[category][area]: the images with ground truth or detections of that category.
  std::vector<std::array<std::vector<ImageEval>, kAreas.size()>> evals(cats.size());
  static const std::vector<const CocoBox*> kNone;
  for (size_t k = 0; k < cats.size(); ++k) {
    for (const std::string& img : image_ids) {
      const auto g = gts.find({img, cats[k]});
      const auto d = dts.find({img, cats[k]});
      if (g == gts.end() && d == dts.end()) continue;
      const ImagePair pair =
          pair_up(g == gts.end() ? kNone : g->second, d == dts.end() ? kNone : d->second);
      for (size_t a = 0; a < kAreas.size(); ++a) {
        evals[k][a].push_back(evaluate_image(pair, kAreas[a]));
      }
    }
  }
  // accumulate() for every category, in one area range with one detection limit; each of the six
  // combinations the stats use is computed once.
  std::map<std::pair<size_t, int>, std::vector<Curve>> cache;
  auto curves = [&](size_t a, int max_det) -> const std::vector<Curve>& {
    auto [it, fresh] = cache.try_emplace({a, max_det});
    if (fresh) {
      for (size_t k = 0; k < cats.size(); ++k) {
        std::vector<const ImageEval*> es;
        for (const ImageEval& e : evals[k][a]) es.push_back(&e);
        it->second.push_back(accumulate(es, max_det));
      }
    }
    return it->second;
  };
  // Precision averaged over IoU thresholds (all, or only .50 / .75), recall points, categories.
  auto ap = [&](size_t a, int only_t) {
    double sum = 0;
    int n = 0;
    for (const Curve& c : curves(a, kMaxDets.back())) {
      if (!c.valid) continue;
      for (int t = 0; t < kT; ++t) {
        if (only_t >= 0 && t != only_t) continue;
        for (double p : c.precision[t]) sum += p;
        n += kR;
      }
    }
    return mean_or_minus1(sum, n);
  };
  auto ar = [&](size_t a, int max_det) {
    double sum = 0;
    int n = 0;
    for (const Curve& c : curves(a, max_det)) {
      if (!c.valid) continue;
      for (double r : c.recall) sum += r;
      n += kT;
    }
    return mean_or_minus1(sum, n);
  };
  CocoStats s;
  s.stats = {ap(0, -1), ap(0, 0),  ap(0, 5),   ap(1, -1),  ap(2, -1),  ap(3, -1),
             ar(0, 1),  ar(0, 10), ar(0, 100), ar(1, 100), ar(2, 100), ar(3, 100)};
  return s;
}

std::string CocoStats::summary() const {
  static const char* kArea[] = {"all", "small", "medium", "large"};
  struct Line {
    bool ap;
    const char* iou;
    int area, max_det;
  };
  static const Line kLines[12] = {
      {true, "0.50:0.95", 0, 100},  {true, "0.50", 0, 100},       {true, "0.75", 0, 100},
      {true, "0.50:0.95", 1, 100},  {true, "0.50:0.95", 2, 100},  {true, "0.50:0.95", 3, 100},
      {false, "0.50:0.95", 0, 1},   {false, "0.50:0.95", 0, 10},  {false, "0.50:0.95", 0, 100},
      {false, "0.50:0.95", 1, 100}, {false, "0.50:0.95", 2, 100}, {false, "0.50:0.95", 3, 100}};
  std::string out;
  for (int i = 0; i < 12; ++i) {
    const Line& l = kLines[i];
    char buf[160];
    std::snprintf(buf, sizeof(buf), " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  l.ap ? "Average Precision" : "Average Recall", l.ap ? "(AP)" : "(AR)", l.iou,
                  kArea[l.area], l.max_det, stats[i]);
    out += buf;
  }
  return out;
}

}  // namespace yolo

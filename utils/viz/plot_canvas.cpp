#include "utils/viz/plot_canvas.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <opencv2/imgproc.hpp>

namespace yolo::plotting {
namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr int kShift = 4;  // sub-pixel bits for anti-aliased lines
constexpr double kOne = 1 << kShift;

// OpenCV sizes Hershey fonts by an abstract scale; calibrate it once against a capital letter so
// that callers can think in pixel heights as matplotlib does in points.
double font_scale(double height_px) {
  static const double cap_at_one = [] {
    int baseline = 0;
    return static_cast<double>(cv::getTextSize("H", kFont, 1.0, 1, &baseline).height);
  }();
  return std::max(0.1, height_px / cap_at_one);
}

cv::Point fixed(const cv::Point2d& p) {
  // Clamp first: data far outside the axes would overflow int in fixed point.
  const double lim = 1e6;
  return {static_cast<int>(std::lround(std::clamp(p.x, -lim, lim) * kOne)),
          static_cast<int>(std::lround(std::clamp(p.y, -lim, lim) * kOne))};
}

// Alpha-blends `color` into img where `mask` (CV_8U, same size as the ROI) is set.
void blend_mask(cv::Mat& img, const cv::Mat& mask, cv::Point origin, const cv::Scalar& color) {
  const cv::Rect roi = cv::Rect(origin, mask.size()) & cv::Rect(0, 0, img.cols, img.rows);
  for (int y = roi.y; y < roi.y + roi.height; ++y) {
    const uchar* m = mask.ptr<uchar>(y - origin.y);
    cv::Vec3b* row = img.ptr<cv::Vec3b>(y);
    for (int x = roi.x; x < roi.x + roi.width; ++x) {
      const double a = m[x - origin.x] / 255.0;
      if (a <= 0) continue;
      for (int c = 0; c < 3; ++c) {
        row[x][c] = cv::saturate_cast<uchar>(row[x][c] * (1 - a) + color[c] * a);
      }
    }
  }
}

double aligned(double anchor, double size, Align a) {
  switch (a) {
    case Align::kStart:
      return anchor;
    case Align::kCenter:
      return anchor - size / 2;
    case Align::kEnd:
      return anchor - size;
  }
  return anchor;
}

cv::Scalar hex_bgr(unsigned rgb) { return cv::Scalar(rgb & 0xff, (rgb >> 8) & 0xff, rgb >> 16); }

}  // namespace

cv::Size text_size(const std::string& text, double height_px, int thickness) {
  int baseline = 0;
  return cv::getTextSize(text, kFont, font_scale(height_px), thickness, &baseline);
}

void draw_text(cv::Mat& img, const std::string& text, cv::Point2d anchor, double height_px,
               const cv::Scalar& color, Align h, Align v, int thickness, bool vertical) {
  if (text.empty()) return;
  const double scale = font_scale(height_px);
  int baseline = 0;
  const cv::Size sz = cv::getTextSize(text, kFont, scale, thickness, &baseline);
  if (!vertical) {
    const double x = aligned(anchor.x, sz.width, h);
    const double top = aligned(anchor.y, sz.height, v);
    cv::putText(img, text, cv::Point(std::lround(x), std::lround(top + sz.height)), kFont, scale,
                color, thickness, cv::LINE_AA);
    return;
  }
  // putText cannot rotate: render into a mask, turn it and blend it in.
  const int pad = thickness + 1;
  cv::Mat mask(sz.height + baseline + 2 * pad, sz.width + 2 * pad, CV_8U, cv::Scalar(0));
  cv::putText(mask, text, cv::Point(pad, pad + sz.height), kFont, scale, cv::Scalar(255), thickness,
              cv::LINE_AA);
  cv::rotate(mask, mask, cv::ROTATE_90_COUNTERCLOCKWISE);
  // Align on the glyph box (cap height), not on the descender padding.
  const double box_w = sz.height, box_h = sz.width;
  const double x = aligned(anchor.x, box_w, h) - pad;
  const double y = aligned(anchor.y, box_h, v) - pad;
  blend_mask(img, mask, cv::Point(std::lround(x), std::lround(y)), color);
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || max_ticks < 1) return {};
  if (hi < lo) std::swap(lo, hi);
  const double span = hi - lo;
  // A span below float resolution would make `t += step` stall.
  if (span <= 1e-12 * std::max(std::abs(lo), std::abs(hi))) return {lo};
  const double mag = std::pow(10.0, std::floor(std::log10(span / max_ticks)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (span / (m * mag) <= max_ticks) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> ticks;
  const double eps = step * 1e-9;
  const double first = std::ceil((lo - eps) / step);
  for (int i = 0; i <= max_ticks + 1; ++i) {
    const double t = (first + i) * step;
    if (t > hi + eps) break;
    ticks.push_back(std::abs(t) < eps ? 0.0 : t);
  }
  return ticks;
}

std::string format_tick(double value, const std::vector<double>& ticks) {
  int decimals = 0;
  for (double t : ticks) {
    // Fewest decimals (at most 4) that print this tick exactly.
    int d = 0;
    for (; d < 4; ++d) {
      const double p = std::pow(10.0, d);
      if (std::abs(std::round(t * p) - t * p) < 1e-6 * std::max(1.0, std::abs(t * p))) break;
    }
    decimals = std::max(decimals, d);
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, std::abs(value) < 1e-12 ? 0.0 : value);
  return buf;
}

std::pair<double, double> auto_range(const std::vector<double>& v, double margin) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double x : v) {
    if (std::isfinite(x)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  if (!std::isfinite(lo)) return {0.0, 1.0};
  // Equal values (up to rounding, e.g. a smoothed single point) get a unit-wide range.
  if (hi - lo <= 1e-9 * std::max(1.0, std::abs(hi))) return {lo - 0.5, hi + 0.5};
  const double m = (hi - lo) * margin;
  return {lo - m, hi + m};
}

cv::Scalar blues(double t) {
  static const std::array<unsigned, 9> stops = {0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6,
                                                0x4292c6, 0x2171b5, 0x08519c, 0x08306b};
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * (stops.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), stops.size() - 2);
  const double f = t - i;
  return hex_bgr(stops[i]) * (1 - f) + hex_bgr(stops[i + 1]) * f;
}

cv::Scalar tab10(int i) {
  static const std::array<unsigned, 10> cycle = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                                 0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
  return hex_bgr(cycle[((i % 10) + 10) % 10]);
}

Axes::Axes(const cv::Rect& box, double x0, double x1, double y0, double y1)
    : box_(box), x0_(x0), x1_(x1), y0_(y0), y1_(y1) {
  // A zero span would divide by zero in to_px.
  if (!(x1_ > x0_)) x1_ = x0_ + 1;
  if (!(y1_ > y0_)) y1_ = y0_ + 1;
}

cv::Point2d Axes::to_px(double x, double y) const {
  return {box_.x + (x - x0_) / (x1_ - x0_) * box_.width,
          box_.y + box_.height - (y - y0_) / (y1_ - y0_) * box_.height};
}

void Axes::set_xticks(std::vector<double> pos, std::vector<std::string> labels, bool vertical) {
  xtick_pos_ = std::move(pos);
  xtick_labels_ = std::move(labels);
  xtick_vertical_ = vertical;
}

void Axes::set_yticks(std::vector<double> pos, std::vector<std::string> labels) {
  ytick_pos_ = std::move(pos);
  ytick_labels_ = std::move(labels);
}

void Axes::draw(cv::Mat& img, const std::string& title, const std::string& xlabel,
                const std::string& ylabel, double font_px, bool frame, bool grid,
                double tick_px) const {
  if (tick_px <= 0) tick_px = 0.75 * font_px;
  const double label_px = 0.85 * font_px;
  const int lw = std::max(1, static_cast<int>(std::lround(font_px / 14)));
  const double tl = 0.4 * font_px, pad = 0.35 * font_px;
  const cv::Scalar black(0, 0, 0), grey(225, 225, 225);
  const int left = box_.x, right = box_.x + box_.width, top = box_.y;
  const int bottom = box_.y + box_.height;

  auto ticks_of = [&](const std::vector<double>& pos, const std::vector<std::string>& labels,
                      double lo, double hi, std::vector<double>* p, std::vector<std::string>* l) {
    if (!pos.empty()) {
      *p = pos;
      *l = labels;
      l->resize(p->size());
    } else {
      *p = nice_ticks(lo, hi);
      for (double t : *p) l->push_back(format_tick(t, *p));
    }
  };
  std::vector<double> xp, yp;
  std::vector<std::string> xl, yl;
  ticks_of(xtick_pos_, xtick_labels_, x0_, x1_, &xp, &xl);
  ticks_of(ytick_pos_, ytick_labels_, y0_, y1_, &yp, &yl);
  const double eps_x = (x1_ - x0_) * 1e-6, eps_y = (y1_ - y0_) * 1e-6;

  double below = 0;  // height taken by the x tick labels
  for (size_t i = 0; i < xp.size(); ++i) {
    if (xp[i] < x0_ - eps_x || xp[i] > x1_ + eps_x) continue;
    const double px = to_px(xp[i], y0_).x;
    if (grid) cv::line(img, cv::Point(px, top), cv::Point(px, bottom), grey, lw, cv::LINE_AA);
    cv::line(img, cv::Point(px, bottom), cv::Point(px, bottom + tl), black, lw, cv::LINE_AA);
    draw_text(img, xl[i], {px, bottom + tl + pad}, tick_px, black, Align::kCenter, Align::kStart, 1,
              xtick_vertical_);
    const cv::Size s = text_size(xl[i], tick_px);
    below = std::max<double>(below, xtick_vertical_ ? s.width : s.height);
  }
  double aside = 0;  // width taken by the y tick labels
  for (size_t i = 0; i < yp.size(); ++i) {
    if (yp[i] < y0_ - eps_y || yp[i] > y1_ + eps_y) continue;
    const double py = to_px(x0_, yp[i]).y;
    if (grid) cv::line(img, cv::Point(left, py), cv::Point(right, py), grey, lw, cv::LINE_AA);
    cv::line(img, cv::Point(left - tl, py), cv::Point(left, py), black, lw, cv::LINE_AA);
    draw_text(img, yl[i], {left - tl - pad, py}, tick_px, black, Align::kEnd, Align::kCenter);
    aside = std::max<double>(aside, text_size(yl[i], tick_px).width);
  }
  if (frame) cv::rectangle(img, box_, black, lw, cv::LINE_AA);
  draw_text(img, xlabel, {left + box_.width / 2.0, bottom + tl + 2 * pad + below}, label_px, black,
            Align::kCenter, Align::kStart);
  draw_text(img, ylabel, {left - tl - 2 * pad - aside, top + box_.height / 2.0}, label_px, black,
            Align::kEnd, Align::kCenter, 1, true);
  draw_text(img, title, {left + box_.width / 2.0, top - 0.7 * font_px}, font_px, black,
            Align::kCenter, Align::kEnd);
}

void Axes::plot(cv::Mat& img, const std::vector<double>& x, const std::vector<double>& y,
                const cv::Scalar& color, int thickness, bool dotted) const {
  const cv::Rect clip(box_.x * kOne, box_.y * kOne, (box_.width + 1) * kOne,
                      (box_.height + 1) * kOne);
  const double dash = 2.0 * thickness;  // dotted: on and off lengths in pixels
  double phase = 0;                     // distance walked along the current dotted line
  auto segment = [&](cv::Point2d a, cv::Point2d b) {
    cv::Point p = fixed(a), q = fixed(b);
    if (cv::clipLine(clip, p, q)) cv::line(img, p, q, color, thickness, cv::LINE_AA, kShift);
  };
  const size_t n = std::min(x.size(), y.size());
  for (size_t i = 1; i < n; ++i) {
    if (!std::isfinite(x[i - 1]) || !std::isfinite(y[i - 1]) || !std::isfinite(x[i]) ||
        !std::isfinite(y[i])) {
      continue;
    }
    const cv::Point2d a = to_px(x[i - 1], y[i - 1]), b = to_px(x[i], y[i]);
    if (!dotted) {
      segment(a, b);
      continue;
    }
    const double len = cv::norm(b - a);
    double t = 0;
    while (t < len) {
      const double in_period = std::fmod(phase, 2 * dash);
      const double step = std::min(len - t, (in_period < dash ? dash : 2 * dash) - in_period);
      if (in_period < dash) segment(a + (b - a) * (t / len), a + (b - a) * ((t + step) / len));
      t += step;
      phase += step;
    }
  }
  if (n == 1 && std::isfinite(x[0]) && std::isfinite(y[0])) {
    // A single point has no segment; show it as a dot so a 1-epoch run is visible.
    scatter(img, x, y, color, std::max(2, thickness));
  }
}

void Axes::scatter(cv::Mat& img, const std::vector<double>& x, const std::vector<double>& y,
                   const cv::Scalar& color, int radius) const {
  const size_t n = std::min(x.size(), y.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
    const cv::Point2d p = to_px(x[i], y[i]);
    if (p.x < box_.x - 1 || p.x > box_.x + box_.width + 1 || p.y < box_.y - 1 ||
        p.y > box_.y + box_.height + 1) {
      continue;
    }
    cv::circle(img, fixed(p), radius * kOne, color, cv::FILLED, cv::LINE_AA, kShift);
  }
}

cv::Size legend_size(const std::vector<LegendEntry>& entries, double font_px) {
  if (entries.empty()) return {0, 0};
  const double row = 1.9 * font_px, sample = 2.5 * font_px, pad = 0.8 * font_px;
  double w = 0;
  for (const auto& e : entries) w = std::max<double>(w, text_size(e.label, font_px).width);
  return cv::Size(std::lround(2 * pad + sample + pad + w),
                  std::lround(2 * pad + row * entries.size() - (row - font_px)));
}

void draw_legend(cv::Mat& img, cv::Point top_left, const std::vector<LegendEntry>& entries,
                 double font_px) {
  if (entries.empty()) return;
  const double row = 1.9 * font_px, sample = 2.5 * font_px, pad = 0.8 * font_px;
  const cv::Size size = legend_size(entries, font_px);
  const cv::Rect box(top_left, size);
  cv::rectangle(img, box, cv::Scalar(255, 255, 255), cv::FILLED);
  cv::rectangle(img, box, cv::Scalar(204, 204, 204), std::max(1, int(font_px / 14)), cv::LINE_AA);
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const double cy = top_left.y + pad + row * i + font_px / 2;
    const double x0 = top_left.x + pad;
    // Reuse Axes::plot for the sample so dotted entries look like their lines.
    Axes sample_axes(cv::Rect(x0, cy - font_px, sample, 2 * font_px), 0, 1, -1, 1);
    sample_axes.plot(img, {0, 1}, {0, 0}, e.color, e.thickness, e.dotted);
    draw_text(img, e.label, {x0 + sample + pad, cy}, font_px, cv::Scalar(0, 0, 0), Align::kStart,
              Align::kCenter);
  }
}

}  // namespace yolo::plotting

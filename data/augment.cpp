#include "data/augment.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

namespace yolo {

double uniform(Rng& rng, double a, double b) {
  return a + (b - a) * (static_cast<double>(rng() >> 11) * 0x1.0p-53);
}

namespace {

struct HypKey {
  const char* name;
  double AugmentHyp::*value;
  bool unit;  // must lie in 0..1
};

constexpr HypKey kHypKeys[] = {
    {"hsv_h", &AugmentHyp::hsv_h, true},          {"hsv_s", &AugmentHyp::hsv_s, true},
    {"hsv_v", &AugmentHyp::hsv_v, true},          {"degrees", &AugmentHyp::degrees, false},
    {"translate", &AugmentHyp::translate, true},  {"scale", &AugmentHyp::scale, false},
    {"shear", &AugmentHyp::shear, false},         {"perspective", &AugmentHyp::perspective, false},
    {"flipud", &AugmentHyp::flipud, true},        {"fliplr", &AugmentHyp::fliplr, true},
    {"mosaic", &AugmentHyp::mosaic, true},        {"mixup", &AugmentHyp::mixup, true},
    {"copy_paste", &AugmentHyp::copy_paste, true}};

void check_range(const HypKey& k, double v, const std::string& at) {
  if (!std::isfinite(v) || v < 0 || (k.unit && v > 1)) {
    throw std::runtime_error(at + " is out of range (" + std::string(k.unit ? "0..1" : ">= 0") +
                             ")");
  }
}

}  // namespace

AugmentHyp AugmentHyp::from_yaml(const YAML::Node& node, const std::string& context) {
  AugmentHyp h;
  for (const auto& k : kHypKeys) {
    const YAML::Node v = node[k.name];
    if (!v) continue;
    const std::string at =
        context + ":" + std::to_string(v.Mark().line + 1) + ": key '" + k.name + "'";
    try {
      h.*k.value = v.as<double>();
    } catch (const YAML::Exception&) {
      throw std::runtime_error(at + " must be a number");
    }
    check_range(k, h.*k.value, at);
  }
  return h;
}

AugmentHyp AugmentHyp::from_map(const std::map<std::string, double>& values,
                                const std::string& context,
                                const std::map<std::string, std::string>& given) {
  AugmentHyp h;
  for (const auto& k : kHypKeys) {
    const auto it = values.find(k.name);
    if (it == values.end()) continue;
    h.*k.value = it->second;
    const auto typed = given.find(k.name);
    check_range(k, it->second,
                (typed != given.end() ? typed->second : context) + ": key '" + k.name + "'");
  }
  return h;
}

AugmentHyp AugmentHyp::none() {
  AugmentHyp h;
  h.hsv_h = h.hsv_s = h.hsv_v = 0;
  h.degrees = h.translate = h.scale = h.shear = h.perspective = 0;
  h.flipud = h.fliplr = h.mosaic = h.mixup = h.copy_paste = 0;
  return h;
}

cv::Mat resize_to_imgsz(const cv::Mat& im, int imgsz, bool augment) {
  const double r = static_cast<double>(imgsz) / std::max(im.rows, im.cols);
  if (r == 1) return im;
  const int interp = (augment || r > 1) ? cv::INTER_LINEAR : cv::INTER_AREA;
  cv::Mat out;
  cv::resize(
      im, out,
      cv::Size(static_cast<int>(std::ceil(im.cols * r)), static_cast<int>(std::ceil(im.rows * r))),
      0, 0, interp);
  return out;
}

cv::Size resized_size(cv::Size sz, int imgsz) {
  const double r = static_cast<double>(imgsz) / std::max(sz.width, sz.height);
  if (r == 1) return sz;
  return {static_cast<int>(std::ceil(sz.width * r)), static_cast<int>(std::ceil(sz.height * r))};
}

LetterboxResult letterbox_plan(cv::Size in, cv::Size shape, bool auto_pad, bool scale_fill,
                               bool scaleup, int stride) {
  LetterboxResult out;
  double r = std::min(static_cast<double>(shape.height) / in.height,
                      static_cast<double>(shape.width) / in.width);
  if (!scaleup) r = std::min(r, 1.0);
  int new_w = static_cast<int>(std::lround(in.width * r));
  int new_h = static_cast<int>(std::lround(in.height * r));
  double dw = shape.width - new_w, dh = shape.height - new_h;
  out.ratio_w = out.ratio_h = static_cast<float>(r);
  if (auto_pad) {
    dw = std::fmod(dw, stride), dh = std::fmod(dh, stride);
  } else if (scale_fill) {
    dw = dh = 0;
    new_w = shape.width, new_h = shape.height;
    out.ratio_w = static_cast<float>(shape.width) / in.width;
    out.ratio_h = static_cast<float>(shape.height) / in.height;
  }
  dw /= 2, dh /= 2;
  const int top = static_cast<int>(std::lround(dh - 0.1)),
            bottom = static_cast<int>(std::lround(dh + 0.1));
  const int left = static_cast<int>(std::lround(dw - 0.1)),
            right = static_cast<int>(std::lround(dw + 0.1));
  out.content = cv::Rect(left, top, new_w, new_h);
  out.size = cv::Size(left + new_w + right, top + new_h + bottom);
  out.pad_w = static_cast<float>(dw), out.pad_h = static_cast<float>(dh);
  return out;
}

LetterboxResult letterbox(const cv::Mat& im, cv::Size shape, bool auto_pad, bool scale_fill,
                          bool scaleup, int stride) {
  LetterboxResult out = letterbox_plan(im.size(), shape, auto_pad, scale_fill, scaleup, stride);
  const cv::Rect c = out.content;
  cv::Mat resized = im;
  if (im.size() != c.size()) cv::resize(im, resized, c.size(), 0, 0, cv::INTER_LINEAR);
  if (out.size != c.size()) {
    cv::copyMakeBorder(resized, out.image, c.y, out.size.height - c.br().y, c.x,
                       out.size.width - c.br().x, cv::BORDER_CONSTANT, cv::Scalar(114, 114, 114));
  } else {
    out.image = resized;
  }
  return out;
}

bool box_candidate(const PixelBox& before, const PixelBox& after, float wh_thr, float ar_thr,
                   float area_thr) {
  constexpr float eps = 1e-16f;
  const float w1 = before.x2 - before.x1, h1 = before.y2 - before.y1;
  const float w2 = after.x2 - after.x1, h2 = after.y2 - after.y1;
  const float ar = std::max(w2 / (h2 + eps), h2 / (w2 + eps));
  return w2 > wh_thr && h2 > wh_thr && w2 * h2 / (w1 * h1 + eps) > area_thr && ar < ar_thr;
}

WarpParams draw_warp(cv::Size in, const AugmentHyp& hyp, Rng& rng, int border) {
  WarpParams w;
  w.size = cv::Size(in.width + border * 2, in.height + border * 2);
  cv::Matx33d C = cv::Matx33d::eye(), P = cv::Matx33d::eye(), R = cv::Matx33d::eye(),
              S = cv::Matx33d::eye(), T = cv::Matx33d::eye();
  C(0, 2) = -in.width / 2.0;  // centre the image on the origin
  C(1, 2) = -in.height / 2.0;
  P(2, 0) = uniform(rng, -hyp.perspective, hyp.perspective);
  P(2, 1) = uniform(rng, -hyp.perspective, hyp.perspective);
  const double a = uniform(rng, -hyp.degrees, hyp.degrees);
  w.scale = uniform(rng, 1 - hyp.scale, 1 + hyp.scale);
  const cv::Mat rot = cv::getRotationMatrix2D(cv::Point2f(0, 0), a, w.scale);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) R(i, j) = rot.at<double>(i, j);
  }
  S(0, 1) = std::tan(uniform(rng, -hyp.shear, hyp.shear) * CV_PI / 180);
  S(1, 0) = std::tan(uniform(rng, -hyp.shear, hyp.shear) * CV_PI / 180);
  T(0, 2) = uniform(rng, 0.5 - hyp.translate, 0.5 + hyp.translate) * w.size.width;
  T(1, 2) = uniform(rng, 0.5 - hyp.translate, 0.5 + hyp.translate) * w.size.height;
  w.M = T * S * R * P * C;  // right to left: centre first
  w.perspective = hyp.perspective != 0;
  w.applied = border != 0 || w.M != cv::Matx33d::eye();
  return w;
}

cv::Mat render_warp(const cv::Mat& im, const WarpParams& w) {
  if (!w.applied) return im;
  cv::Mat out;
  if (w.perspective) {
    cv::warpPerspective(im, out, cv::Mat(w.M), w.size, cv::INTER_LINEAR, cv::BORDER_CONSTANT,
                        cv::Scalar(114, 114, 114));
  } else {
    const cv::Matx23d A(w.M(0, 0), w.M(0, 1), w.M(0, 2), w.M(1, 0), w.M(1, 1), w.M(1, 2));
    cv::warpAffine(im, out, cv::Mat(A), w.size, cv::INTER_LINEAR, cv::BORDER_CONSTANT,
                   cv::Scalar(114, 114, 114));
  }
  return out;
}

void warp_boxes(const WarpParams& w, PixelBoxes& boxes) {
  const double width = w.size.width, height = w.size.height;
  const float s = static_cast<float>(w.scale);
  PixelBoxes kept;
  kept.reserve(boxes.size());
  for (const auto& b : boxes) {
    const double xs[4] = {b.x1, b.x2, b.x1, b.x2}, ys[4] = {b.y1, b.y2, b.y2, b.y1};
    double x1 = 1e30, y1 = 1e30, x2 = -1e30, y2 = -1e30;
    for (int k = 0; k < 4; ++k) {
      const cv::Vec3d p = w.M * cv::Vec3d(xs[k], ys[k], 1);
      const double x = w.perspective ? p[0] / p[2] : p[0];
      const double y = w.perspective ? p[1] / p[2] : p[1];
      x1 = std::min(x1, x), x2 = std::max(x2, x), y1 = std::min(y1, y), y2 = std::max(y2, y);
    }
    PixelBox nb{b.cls, static_cast<float>(std::clamp(x1, 0.0, width)),
                static_cast<float>(std::clamp(y1, 0.0, height)),
                static_cast<float>(std::clamp(x2, 0.0, width)),
                static_cast<float>(std::clamp(y2, 0.0, height))};
    const PixelBox scaled{b.cls, b.x1 * s, b.y1 * s, b.x2 * s, b.y2 * s};
    if (box_candidate(scaled, nb)) kept.push_back(nb);
  }
  boxes = std::move(kept);
}

cv::Mat random_perspective(const cv::Mat& im, PixelBoxes& boxes, const AugmentHyp& hyp, Rng& rng,
                           int border) {
  const WarpParams w = draw_warp(im.size(), hyp, rng, border);
  warp_boxes(w, boxes);
  return render_warp(im, w);
}

CanvasLayout place_mosaic(const std::array<cv::Size, 4>& sizes, int s, Rng& rng) {
  const int border = -s / 2;
  const int yc = static_cast<int>(uniform(rng, -border, 2 * s + border));
  const int xc = static_cast<int>(uniform(rng, -border, 2 * s + border));
  CanvasLayout layout;
  layout.size = cv::Size(2 * s, 2 * s);
  for (int i = 0; i < 4; ++i) {
    const int h = sizes[i].height, w = sizes[i].width;
    int x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b;
    if (i == 0) {  // top left
      x1a = std::max(xc - w, 0), y1a = std::max(yc - h, 0), x2a = xc, y2a = yc;
      x1b = w - (x2a - x1a), y1b = h - (y2a - y1a), x2b = w, y2b = h;
    } else if (i == 1) {  // top right
      x1a = xc, y1a = std::max(yc - h, 0), x2a = std::min(xc + w, 2 * s), y2a = yc;
      x1b = 0, y1b = h - (y2a - y1a), x2b = std::min(w, x2a - x1a), y2b = h;
    } else if (i == 2) {  // bottom left
      x1a = std::max(xc - w, 0), y1a = yc, x2a = xc, y2a = std::min(2 * s, yc + h);
      x1b = w - (x2a - x1a), y1b = 0, x2b = w, y2b = std::min(y2a - y1a, h);
    } else {  // bottom right
      x1a = xc, y1a = yc, x2a = std::min(xc + w, 2 * s), y2a = std::min(2 * s, yc + h);
      x1b = 0, y1b = 0, x2b = std::min(w, x2a - x1a), y2b = std::min(y2a - y1a, h);
    }
    layout.tiles.push_back(
        {cv::Rect(x1b, y1b, x2b - x1b, y2b - y1b), cv::Rect(x1a, y1a, x2a - x1a, y2a - y1a)});
  }
  return layout;
}

PixelBoxes mosaic_boxes(const CanvasLayout& layout, const std::array<cv::Size, 4>& sizes,
                        const std::array<const Labels*, 4>& labels) {
  PixelBoxes boxes;
  for (int i = 0; i < 4; ++i) {
    const auto& t = layout.tiles[i];
    const float padw = static_cast<float>(t.dst.x - t.src.x),
                padh = static_cast<float>(t.dst.y - t.src.y);
    for (const auto& b : to_pixel_boxes(*labels[i], sizes[i].width, sizes[i].height, padw, padh)) {
      boxes.push_back(b);
    }
  }
  const float lim = static_cast<float>(layout.size.width);
  for (auto& b : boxes) {
    b.x1 = std::clamp(b.x1, 0.f, lim), b.x2 = std::clamp(b.x2, 0.f, lim);
    b.y1 = std::clamp(b.y1, 0.f, lim), b.y2 = std::clamp(b.y2, 0.f, lim);
  }
  return boxes;
}

cv::Mat render_layout(const std::vector<cv::Mat>& sources, const CanvasLayout& layout) {
  if (layout.tiles.size() == 1 && layout.tiles[0].dst == cv::Rect(cv::Point(), layout.size) &&
      layout.tiles[0].src == cv::Rect(cv::Point(), sources[0].size())) {
    return sources[0];
  }
  cv::Mat canvas(layout.size, sources[0].type(), cv::Scalar(114, 114, 114));
  for (size_t i = 0; i < layout.tiles.size(); ++i) {
    const auto& t = layout.tiles[i];
    if (!t.dst.empty()) sources[i](t.src).copyTo(canvas(t.dst));
  }
  return canvas;
}

cv::Mat render_canvas(const CanvasRecipe& recipe) {
  const cv::Mat placed = render_layout(recipe.sources, recipe.layout);
  const cv::Mat out = render_warp(placed, recipe.warp);
  return out.datastart == recipe.sources[0].datastart ? out.clone() : out;
}

cv::Mat mosaic4(const std::array<cv::Mat, 4>& images, const std::array<const Labels*, 4>& labels,
                int s, Rng& rng, PixelBoxes& boxes) {
  std::array<cv::Size, 4> sizes;
  for (int i = 0; i < 4; ++i) sizes[i] = images[i].size();
  const CanvasLayout layout = place_mosaic(sizes, s, rng);
  boxes = mosaic_boxes(layout, sizes, labels);
  return render_layout({images.begin(), images.end()}, layout);
}

double draw_mixup_ratio(Rng& rng) {
  // Beta(32, 32) from two gammas.
  std::gamma_distribution<double> g(32.0, 1.0);
  const double x = g(rng), y = g(rng);
  return x / (x + y);
}

cv::Mat blend(const cv::Mat& a, const cv::Mat& b, double r) {
  cv::Mat out;
  cv::addWeighted(a, r, b, 1 - r, 0, out);
  return out;
}

cv::Mat mixup(const cv::Mat& a, PixelBoxes& boxes_a, const cv::Mat& b, const PixelBoxes& boxes_b,
              Rng& rng) {
  const double r = draw_mixup_ratio(rng);
  boxes_a.insert(boxes_a.end(), boxes_b.begin(), boxes_b.end());
  return blend(a, b, r);
}

HsvGains draw_hsv(double hgain, double sgain, double vgain, Rng& rng) {
  HsvGains g;
  if (hgain == 0 && sgain == 0 && vgain == 0) return g;
  g.h = uniform(rng, -1, 1) * hgain + 1;
  g.s = uniform(rng, -1, 1) * sgain + 1;
  g.v = uniform(rng, -1, 1) * vgain + 1;
  g.applied = true;
  return g;
}

cv::Mat hsv_lut(const HsvGains& g) {
  cv::Mat lut(1, 256, CV_8UC3);
  for (int x = 0; x < 256; ++x) {
    lut.at<cv::Vec3b>(0, x) =
        cv::Vec3b(static_cast<uchar>(static_cast<int>(std::fmod(x * g.h, 180.0))),
                  static_cast<uchar>(std::clamp(x * g.s, 0.0, 255.0)),
                  static_cast<uchar>(std::clamp(x * g.v, 0.0, 255.0)));
  }
  return lut;
}

void apply_hsv(cv::Mat& im, const HsvGains& g) {
  if (!g.applied) return;
  cv::Mat hsv;
  cv::cvtColor(im, hsv, cv::COLOR_BGR2HSV);
  cv::LUT(hsv, hsv_lut(g), hsv);
  cv::cvtColor(hsv, im, cv::COLOR_HSV2BGR);
}

void augment_hsv(cv::Mat& im, double hgain, double sgain, double vgain, Rng& rng) {
  const HsvGains g = draw_hsv(hgain, sgain, vgain, rng);
  apply_hsv(im, g);
}

void flip_labels_lr(Labels& labels) {
  for (auto& l : labels) l.cx = 1 - l.cx;
}

void flip_labels_ud(Labels& labels) {
  for (auto& l : labels) l.cy = 1 - l.cy;
}

void flip_lr(cv::Mat& im, Labels& labels) {
  cv::flip(im, im, 1);
  flip_labels_lr(labels);
}

void flip_ud(cv::Mat& im, Labels& labels) {
  cv::flip(im, im, 0);
  flip_labels_ud(labels);
}

}  // namespace yolo

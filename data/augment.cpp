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
                                const std::string& context) {
  AugmentHyp h;
  for (const auto& k : kHypKeys) {
    const auto it = values.find(k.name);
    if (it == values.end()) continue;
    h.*k.value = it->second;
    check_range(k, it->second, context + ": key '" + k.name + "'");
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

LetterboxResult letterbox(const cv::Mat& im, cv::Size shape, bool auto_pad, bool scale_fill,
                          bool scaleup, int stride) {
  LetterboxResult out;
  double r = std::min(static_cast<double>(shape.height) / im.rows,
                      static_cast<double>(shape.width) / im.cols);
  if (!scaleup) r = std::min(r, 1.0);
  int new_w = static_cast<int>(std::lround(im.cols * r));
  int new_h = static_cast<int>(std::lround(im.rows * r));
  double dw = shape.width - new_w, dh = shape.height - new_h;
  out.ratio_w = out.ratio_h = static_cast<float>(r);
  if (auto_pad) {
    dw = std::fmod(dw, stride), dh = std::fmod(dh, stride);
  } else if (scale_fill) {
    dw = dh = 0;
    new_w = shape.width, new_h = shape.height;
    out.ratio_w = static_cast<float>(shape.width) / im.cols;
    out.ratio_h = static_cast<float>(shape.height) / im.rows;
  }
  dw /= 2, dh /= 2;
  cv::Mat resized = im;
  if (im.cols != new_w || im.rows != new_h) {
    cv::resize(im, resized, cv::Size(new_w, new_h), 0, 0, cv::INTER_LINEAR);
  }
  const int top = static_cast<int>(std::lround(dh - 0.1)),
            bottom = static_cast<int>(std::lround(dh + 0.1));
  const int left = static_cast<int>(std::lround(dw - 0.1)),
            right = static_cast<int>(std::lround(dw + 0.1));
  if (top || bottom || left || right) {
    cv::copyMakeBorder(resized, out.image, top, bottom, left, right, cv::BORDER_CONSTANT,
                       cv::Scalar(114, 114, 114));
  } else {
    out.image = resized;
  }
  out.pad_w = static_cast<float>(dw), out.pad_h = static_cast<float>(dh);
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

cv::Mat random_perspective(const cv::Mat& im, PixelBoxes& boxes, const AugmentHyp& hyp, Rng& rng,
                           int border) {
  const int height = im.rows + border * 2, width = im.cols + border * 2;
  cv::Matx33d C = cv::Matx33d::eye(), P = cv::Matx33d::eye(), R = cv::Matx33d::eye(),
              S = cv::Matx33d::eye(), T = cv::Matx33d::eye();
  C(0, 2) = -im.cols / 2.0;  // centre the image on the origin
  C(1, 2) = -im.rows / 2.0;
  P(2, 0) = uniform(rng, -hyp.perspective, hyp.perspective);
  P(2, 1) = uniform(rng, -hyp.perspective, hyp.perspective);
  const double a = uniform(rng, -hyp.degrees, hyp.degrees);
  const double s = uniform(rng, 1 - hyp.scale, 1 + hyp.scale);
  const cv::Mat rot = cv::getRotationMatrix2D(cv::Point2f(0, 0), a, s);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) R(i, j) = rot.at<double>(i, j);
  }
  S(0, 1) = std::tan(uniform(rng, -hyp.shear, hyp.shear) * CV_PI / 180);
  S(1, 0) = std::tan(uniform(rng, -hyp.shear, hyp.shear) * CV_PI / 180);
  T(0, 2) = uniform(rng, 0.5 - hyp.translate, 0.5 + hyp.translate) * width;
  T(1, 2) = uniform(rng, 0.5 - hyp.translate, 0.5 + hyp.translate) * height;
  const cv::Matx33d M = T * S * R * P * C;  // right to left: centre first

  cv::Mat out;
  if (border != 0 || M != cv::Matx33d::eye()) {
    if (hyp.perspective) {
      cv::warpPerspective(im, out, cv::Mat(M), cv::Size(width, height), cv::INTER_LINEAR,
                          cv::BORDER_CONSTANT, cv::Scalar(114, 114, 114));
    } else {
      const cv::Matx23d A(M(0, 0), M(0, 1), M(0, 2), M(1, 0), M(1, 1), M(1, 2));
      cv::warpAffine(im, out, cv::Mat(A), cv::Size(width, height), cv::INTER_LINEAR,
                     cv::BORDER_CONSTANT, cv::Scalar(114, 114, 114));
    }
  } else {
    out = im;
  }

  PixelBoxes kept;
  kept.reserve(boxes.size());
  for (const auto& b : boxes) {
    const double xs[4] = {b.x1, b.x2, b.x1, b.x2}, ys[4] = {b.y1, b.y2, b.y2, b.y1};
    double x1 = 1e30, y1 = 1e30, x2 = -1e30, y2 = -1e30;
    for (int k = 0; k < 4; ++k) {
      const cv::Vec3d p = M * cv::Vec3d(xs[k], ys[k], 1);
      const double x = hyp.perspective ? p[0] / p[2] : p[0];
      const double y = hyp.perspective ? p[1] / p[2] : p[1];
      x1 = std::min(x1, x), x2 = std::max(x2, x), y1 = std::min(y1, y), y2 = std::max(y2, y);
    }
    PixelBox nb{b.cls, static_cast<float>(std::clamp(x1, 0.0, double(width))),
                static_cast<float>(std::clamp(y1, 0.0, double(height))),
                static_cast<float>(std::clamp(x2, 0.0, double(width))),
                static_cast<float>(std::clamp(y2, 0.0, double(height)))};
    const PixelBox scaled{b.cls, b.x1 * float(s), b.y1 * float(s), b.x2 * float(s),
                          b.y2 * float(s)};
    if (box_candidate(scaled, nb)) kept.push_back(nb);
  }
  boxes = std::move(kept);
  return out;
}

cv::Mat mosaic4(const std::array<cv::Mat, 4>& images, const std::array<const Labels*, 4>& labels,
                int s, Rng& rng, PixelBoxes& boxes) {
  const int border = -s / 2;
  const int yc = static_cast<int>(uniform(rng, -border, 2 * s + border));
  const int xc = static_cast<int>(uniform(rng, -border, 2 * s + border));
  cv::Mat canvas(2 * s, 2 * s, images[0].type(), cv::Scalar(114, 114, 114));
  boxes.clear();
  for (int i = 0; i < 4; ++i) {
    const int h = images[i].rows, w = images[i].cols;
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
    if (x2a > x1a && y2a > y1a) {
      images[i](cv::Rect(x1b, y1b, x2b - x1b, y2b - y1b))
          .copyTo(canvas(cv::Rect(x1a, y1a, x2a - x1a, y2a - y1a)));
    }
    const float padw = static_cast<float>(x1a - x1b), padh = static_cast<float>(y1a - y1b);
    for (const auto& b : to_pixel_boxes(*labels[i], w, h, padw, padh)) boxes.push_back(b);
  }
  const float lim = 2.0f * s;
  for (auto& b : boxes) {
    b.x1 = std::clamp(b.x1, 0.f, lim), b.x2 = std::clamp(b.x2, 0.f, lim);
    b.y1 = std::clamp(b.y1, 0.f, lim), b.y2 = std::clamp(b.y2, 0.f, lim);
  }
  return canvas;
}

cv::Mat mixup(const cv::Mat& a, PixelBoxes& boxes_a, const cv::Mat& b, const PixelBoxes& boxes_b,
              Rng& rng) {
  // Beta(32, 32) from two gammas.
  std::gamma_distribution<double> g(32.0, 1.0);
  const double x = g(rng), y = g(rng);
  const double r = x / (x + y);
  cv::Mat out;
  cv::addWeighted(a, r, b, 1 - r, 0, out);
  boxes_a.insert(boxes_a.end(), boxes_b.begin(), boxes_b.end());
  return out;
}

void augment_hsv(cv::Mat& im, double hgain, double sgain, double vgain, Rng& rng) {
  if (hgain == 0 && sgain == 0 && vgain == 0) return;
  const double r[3] = {uniform(rng, -1, 1) * hgain + 1, uniform(rng, -1, 1) * sgain + 1,
                       uniform(rng, -1, 1) * vgain + 1};
  cv::Mat lut(1, 256, CV_8UC3);
  for (int x = 0; x < 256; ++x) {
    lut.at<cv::Vec3b>(0, x) =
        cv::Vec3b(static_cast<uchar>(static_cast<int>(std::fmod(x * r[0], 180.0))),
                  static_cast<uchar>(std::clamp(x * r[1], 0.0, 255.0)),
                  static_cast<uchar>(std::clamp(x * r[2], 0.0, 255.0)));
  }
  cv::Mat hsv;
  cv::cvtColor(im, hsv, cv::COLOR_BGR2HSV);
  cv::LUT(hsv, lut, hsv);
  cv::cvtColor(hsv, im, cv::COLOR_HSV2BGR);
}

void flip_lr(cv::Mat& im, Labels& labels) {
  cv::flip(im, im, 1);
  for (auto& l : labels) l.cx = 1 - l.cx;
}

void flip_ud(cv::Mat& im, Labels& labels) {
  cv::flip(im, im, 0);
  for (auto& l : labels) l.cy = 1 - l.cy;
}

}  // namespace yolo

#include "utils/viz/plots.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <stdexcept>

#include "utils/core/format.h"
#include "utils/core/io/results_csv.h"
#include "utils/viz/plot_canvas.h"

namespace yolo {
namespace {

namespace fs = std::filesystem;
using plotting::Align;
using plotting::Axes;
using plotting::draw_text;
using plotting::LegendEntry;

const cv::Scalar kBlack(0, 0, 0), kWhite(255, 255, 255), kGrey(128, 128, 128);
const cv::Scalar kPureBlue(255, 0, 0);  // matplotlib's color='blue' for the mean curves

// Cap height in pixels of a matplotlib font of `pt` points saved at `dpi`.
double cap_px(double pt, double dpi) { return pt * dpi / 72.0 * 0.7; }

void write_image(const std::string& path, const cv::Mat& img) {
  const fs::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) {
      throw std::runtime_error("cannot create folder '" + p.parent_path().string() +
                               "' for plot '" + path + "': " + ec.message());
    }
  }
  std::vector<int> params;
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  if (ext == ".jpg" || ext == ".jpeg") params = {cv::IMWRITE_JPEG_QUALITY, 95};
  bool ok = false;
  try {
    ok = cv::imwrite(path, img, params);
  } catch (const cv::Exception& e) {
    throw std::runtime_error("cannot write plot '" + path + "': " + e.what());
  }
  if (!ok) {
    throw std::runtime_error("cannot write plot '" + path +
                             "' (is the folder writable and the extension .png or .jpg?)");
  }
}

// scipy.ndimage.gaussian_filter1d(y, sigma) with its defaults (mode 'reflect', truncate 4).
std::vector<double> gaussian_smooth(const std::vector<double>& y, double sigma) {
  const int n = static_cast<int>(y.size());
  const int r = static_cast<int>(4.0 * sigma + 0.5);
  std::vector<double> w(2 * r + 1);
  double sum = 0;
  for (int k = -r; k <= r; ++k) sum += w[k + r] = std::exp(-0.5 * k * k / (sigma * sigma));
  for (double& v : w) v /= sum;
  std::vector<double> out(n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int k = -r; k <= r; ++k) {
      // Half-sample reflection (d c b a | a b c d | d c b a), repeated for short series.
      int m = ((i + k) % (2 * n) + 2 * n) % (2 * n);
      if (m >= n) m = 2 * n - 1 - m;
      out[i] += w[k + r] * y[m];
    }
  }
  return out;
}

// YOLOv5's smooth(): box filter over a fraction f of the points, padded with the end values.
std::vector<double> box_smooth(const std::vector<double>& y, double f) {
  if (y.empty()) return {};
  const int nf = static_cast<int>(std::nearbyint(y.size() * f * 2)) / 2 + 1;
  const int half = nf / 2;
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    double s = 0;
    for (int k = -half; k <= half; ++k) {
      const long j = std::clamp<long>(static_cast<long>(i) + k, 0, y.size() - 1);
      s += y[j];
    }
    out[i] = s / nf;
  }
  return out;
}

std::vector<double> mean_curve(const std::vector<std::vector<double>>& curves, size_t n) {
  std::vector<double> m(n, 0.0);
  for (const auto& c : curves) {
    for (size_t i = 0; i < n; ++i) m[i] += c[i] / curves.size();
  }
  return m;
}

void check_curves(const std::vector<double>& px, const std::vector<std::vector<double>>& curves,
                  const std::string& path) {
  for (size_t i = 0; i < curves.size(); ++i) {
    if (curves[i].size() != px.size()) {
      throw std::invalid_argument("plot '" + path + "': curve " + std::to_string(i) + " has " +
                                  std::to_string(curves[i].size()) + " points, x has " +
                                  std::to_string(px.size()));
    }
  }
}

// Shared layout of PR_curve.png and the metric-confidence curves (9x6 in at 250 dpi): per-class
// lines, the thick mean, legend outside on the right.
void draw_curves(const std::vector<double>& px, const std::vector<std::vector<double>>& curves,
                 const std::vector<std::string>& labels, bool per_class_legend,
                 const std::vector<double>& mean, const std::string& mean_label,
                 const std::string& title, const std::string& xlabel, const std::string& ylabel,
                 const std::string& path) {
  const double dpi = 250, font = cap_px(12, dpi), legend_font = cap_px(10, dpi);
  cv::Mat img(1500, 2250, CV_8UC3, kWhite);
  std::vector<LegendEntry> legend;
  const int thin = 3, thick = 9;
  if (per_class_legend) {
    for (size_t i = 0; i < curves.size(); ++i)
      legend.push_back({labels[i], plotting::tab10(i), thin});
  }
  if (!mean.empty()) legend.push_back({mean_label, kPureBlue, thick});
  const cv::Size lsize = plotting::legend_size(legend, legend_font);
  const int left = 170, top = 90, bottom = 150, gap = 50;
  const int right = std::max(300, img.cols - (legend.empty() ? 60 : lsize.width + 2 * gap));
  Axes ax(cv::Rect(left, top, right - left, img.rows - top - bottom), 0, 1, 0, 1);
  ax.draw(img, title, xlabel, ylabel, font);
  for (size_t i = 0; i < curves.size(); ++i) {
    ax.plot(img, px, curves[i], per_class_legend ? plotting::tab10(i) : kGrey, thin);
  }
  if (!mean.empty()) ax.plot(img, px, mean, kPureBlue, thick);
  plotting::draw_legend(img, cv::Point(right + gap, top), legend, legend_font);
  write_image(path, img);
}

// seaborn's histplot level for pmax: the count above which the densest cells hold (1 - pmax) of
// all counts; the colour map saturates there.
double pmax_level(std::vector<double> counts, double pmax) {
  std::sort(counts.begin(), counts.end(), std::greater<double>());
  double total = 0;
  for (double c : counts) total += c;
  if (total <= 0) return 1;
  double cum = 0;
  for (double c : counts) {
    cum += c;
    if (cum / total >= 1 - pmax) return std::max(c, 1.0);
  }
  return std::max(counts.back(), 1.0);
}

// Bivariate histogram panel of labels.jpg (seaborn histplot, bins=50, pmax=0.9).
void hist2d_panel(cv::Mat& img, const cv::Rect& box, const std::vector<double>& x,
                  const std::vector<double>& y, const std::string& xlabel,
                  const std::string& ylabel, double font) {
  const int bins = 50;
  // seaborn bins the data's own range, without autoscale margins.
  const auto [x0, x1] = plotting::auto_range(x, 0.0);
  const auto [y0, y1] = plotting::auto_range(y, 0.0);
  std::vector<double> counts(bins * bins, 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
    const int bx = std::clamp(static_cast<int>((x[i] - x0) / (x1 - x0) * bins), 0, bins - 1);
    const int by = std::clamp(static_cast<int>((y[i] - y0) / (y1 - y0) * bins), 0, bins - 1);
    counts[by * bins + bx] += 1;
  }
  const double vmax = pmax_level(counts, 0.9);
  Axes ax(box, x0, x1, y0, y1);
  // seaborn's "light:C0" map: near white to matplotlib's first cycle colour; empty cells stay
  // blank.
  const cv::Scalar light(246, 240, 234), dark = plotting::tab10(0);
  for (int by = 0; by < bins; ++by) {
    for (int bx = 0; bx < bins; ++bx) {
      const double c = counts[by * bins + bx];
      if (c <= 0) continue;
      const double t = std::min(1.0, c / vmax);
      const cv::Point2d p0 = ax.to_px(x0 + (x1 - x0) * bx / bins, y0 + (y1 - y0) * (by + 1) / bins);
      const cv::Point2d p1 = ax.to_px(x0 + (x1 - x0) * (bx + 1) / bins, y0 + (y1 - y0) * by / bins);
      cv::rectangle(img, cv::Point(std::lround(p0.x), std::lround(p0.y)),
                    cv::Point(std::lround(p1.x), std::lround(p1.y)), light * (1 - t) + dark * t,
                    cv::FILLED);
    }
  }
  ax.draw(img, "", xlabel, ylabel, font, /*frame=*/false);
}

// seaborn picks dark or white annotation text from the cell's relative luminance.
bool is_dark(const cv::Scalar& bgr) {
  auto lin = [](double c) {
    c /= 255.0;
    return c <= 0.03928 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * lin(bgr[2]) + 0.7152 * lin(bgr[1]) + 0.0722 * lin(bgr[0]) <= 0.408;
}

}  // namespace

cv::Scalar class_color(int cls) {
  static const unsigned kPalette[] = {0xFF3838, 0xFF9D97, 0xFF701F, 0xFFB21D, 0xCFD231,
                                      0x48F90A, 0x92CC17, 0x3DDB86, 0x1A9334, 0x00D4BB,
                                      0x2C99A8, 0x00C2FF, 0x344593, 0x6473FF, 0x0018EC,
                                      0x8438FF, 0x520085, 0xCB38FF, 0xFF95C8, 0xFF37C7};
  const unsigned rgb = kPalette[((cls % 20) + 20) % 20];
  return cv::Scalar(rgb & 0xff, (rgb >> 8) & 0xff, rgb >> 16);
}

void plot_labels(const std::vector<std::array<float, 5>>& labels,
                 const std::vector<std::string>& names, const std::string& path) {
  const double dpi = 200, font = cap_px(11, dpi), tick_font = 0.75 * font;
  cv::Mat img(1600, 1600, CV_8UC3, kWhite);

  // Instances per class; nc as YOLOv5: the largest class id + 1.
  int nc = 0;
  for (const auto& l : labels) {
    if (std::isfinite(l[0]) && l[0] >= 0) nc = std::max(nc, static_cast<int>(l[0]) + 1);
  }
  std::vector<double> count(nc, 0.0);
  for (const auto& l : labels) {
    if (std::isfinite(l[0]) && l[0] >= 0) count[static_cast<int>(l[0])] += 1;
  }
  const bool named = !names.empty() && names.size() < 30;
  const int nx = std::max<int>(nc, named ? names.size() : 0);
  double longest = 0;
  if (named) {
    for (const auto& n : names) {
      longest = std::max<double>(longest, plotting::text_size(n, tick_font).width);
    }
  }
  const int hist_bottom = 800 - static_cast<int>(std::min(320.0, longest + 70) + 40);
  double cmax = 1;
  for (double c : count) cmax = std::max(cmax, c);
  Axes hist(cv::Rect(150, 50, 610, hist_bottom - 50), -0.5, std::max(nx, 1) - 0.5, 0, cmax * 1.05);
  for (int i = 0; i < nc; ++i) {
    if (count[i] <= 0) continue;
    const cv::Point2d p0 = hist.to_px(i - 0.4, count[i]), p1 = hist.to_px(i + 0.4, 0);
    cv::rectangle(img, cv::Point(std::lround(p0.x), std::lround(p0.y)),
                  cv::Point(std::lround(p1.x), std::lround(p1.y)), class_color(i), cv::FILLED);
  }
  if (named) {
    std::vector<double> pos;
    for (size_t i = 0; i < names.size(); ++i) pos.push_back(i);
    hist.set_xticks(pos, names, /*vertical=*/true);
  } else if (nc > 0 && nc <= 10) {
    std::vector<double> pos;
    std::vector<std::string> text;
    for (int i = 0; i < nc; ++i) {
      pos.push_back(i);
      text.push_back(std::to_string(i));
    }
    hist.set_xticks(pos, text);
  }
  hist.draw(img, "", named ? "" : "classes", "instances", font, /*frame=*/false);

  // Box outlines centred in a square (YOLOv5 draws the first 1000 on a 2000 px image).
  const cv::Rect square(840, 40, 720, 720);
  for (size_t i = 0; i < labels.size() && i < 1000; ++i) {
    const auto& l = labels[i];
    if (!std::isfinite(l[3]) || !std::isfinite(l[4])) continue;
    const double s = square.width;
    const cv::Point2d c(square.x + 0.5 * s, square.y + 0.5 * s);
    const cv::Point p0(std::lround(c.x - l[3] * s / 2), std::lround(c.y - l[4] * s / 2));
    const cv::Point p1(std::lround(c.x + l[3] * s / 2), std::lround(c.y + l[4] * s / 2));
    cv::rectangle(img, p0, p1, class_color(static_cast<int>(l[0])), 1, cv::LINE_AA);
  }

  std::vector<double> x, y, w, h;
  for (const auto& l : labels) {
    x.push_back(l[1]);
    y.push_back(l[2]);
    w.push_back(l[3]);
    h.push_back(l[4]);
  }
  hist2d_panel(img, cv::Rect(150, 850, 610, 610), x, y, "x", "y", font);
  hist2d_panel(img, cv::Rect(950, 850, 610, 610), w, h, "width", "height", font);
  write_image(path, img);
}

void plot_images(const std::vector<cv::Mat>& images, const std::vector<PlotTarget>& targets,
                 const std::vector<std::string>& paths, const std::vector<std::string>& names,
                 const std::string& path, int max_subplots) {
  const int bs = std::min<int>(images.size(), std::max(1, max_subplots));
  if (bs == 0) throw std::invalid_argument("plot '" + path + "': no images to plot");
  int h = images[0].rows, w = images[0].cols;
  for (int i = 0; i < bs; ++i) {
    if (images[i].size() != images[0].size() || images[i].type() != CV_8UC3) {
      throw std::invalid_argument("plot '" + path + "': image " + std::to_string(i) +
                                  " is not a BGR CV_8UC3 image of the first image's size");
    }
  }
  const int ns = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(bs))));
  cv::Mat mosaic(ns * h, ns * w, CV_8UC3, kWhite);
  for (int i = 0; i < bs; ++i) {
    // Column by column, as YOLOv5 (x from i // ns).
    images[i].copyTo(mosaic(cv::Rect(w * (i / ns), h * (i % ns), w, h)));
  }
  const double scale = 1920.0 / ns / std::max(h, w);
  if (scale < 1) {
    h = static_cast<int>(std::ceil(scale * h));
    w = static_cast<int>(std::ceil(scale * w));
    cv::resize(mosaic, mosaic, cv::Size(w * ns, h * ns));
  }

  // Sizes as YOLOv5's Annotator: font ~1% of the mosaic, lines a tenth of that.
  const int fs = static_cast<int>((h + w) * ns * 0.01);
  int lw = static_cast<int>(std::nearbyint(fs / 10.0));
  if (lw == 0)
    lw = std::max(2, static_cast<int>(std::lround((mosaic.cols + mosaic.rows) * 0.0015)));
  const double font = std::max(6.0, 0.72 * fs);
  const int text_thickness = std::max(1, static_cast<int>(std::lround(font / 16)));
  for (int i = 0; i < bs; ++i) {
    const int x = w * (i / ns), y = h * (i % ns);
    cv::rectangle(mosaic, cv::Rect(x, y, w, h), kWhite, 2);
    if (i < static_cast<int>(paths.size())) {
      const std::string file = fs::path(paths[i]).filename().string().substr(0, 40);
      draw_text(mosaic, file, {x + 5.0, y + 5.0}, font, cv::Scalar(220, 220, 220), Align::kStart,
                Align::kStart, text_thickness);
    }
    std::vector<const PlotTarget*> ti;
    double cmax = 0;
    for (const auto& t : targets) {
      if (t.image != i) continue;
      ti.push_back(&t);
      cmax = std::max({cmax, double(t.cx + t.w / 2), double(t.cy + t.h / 2), double(t.cx - t.w / 2),
                       double(t.cy - t.h / 2)});
    }
    const bool normalised = cmax <= 1.01;
    for (const PlotTarget* t : ti) {
      const bool label = t->conf < 0;
      if (!label && !(t->conf > 0.25)) continue;
      double x1 = t->cx - t->w / 2, y1 = t->cy - t->h / 2, x2 = t->cx + t->w / 2,
             y2 = t->cy + t->h / 2;
      if (normalised) {
        x1 *= w, x2 *= w, y1 *= h, y2 *= h;
      } else if (scale < 1) {
        x1 *= scale, x2 *= scale, y1 *= scale, y2 *= scale;
      }
      const cv::Point p1(std::lround(x1 + x), std::lround(y1 + y));
      const cv::Point p2(std::lround(x2 + x), std::lround(y2 + y));
      const cv::Scalar color = class_color(t->cls);
      cv::rectangle(mosaic, p1, p2, color, lw, cv::LINE_AA);
      const std::string text =
          label ? class_name(names, t->cls)
                : class_name(names, t->cls) + " " + format_number("%.1f", t->conf);
      // Tag above the box when it fits, else inside its top edge (Annotator.box_label).
      const cv::Size ts = plotting::text_size(text, font, text_thickness);
      const int pad = std::max(1, static_cast<int>(font * 0.25));
      const int th = ts.height + 2 * pad, tw = ts.width + 2 * pad;
      const bool outside = p1.y - th >= 0;
      const cv::Rect tag(p1.x, outside ? p1.y - th : p1.y, tw, th);
      cv::rectangle(mosaic, tag, color, cv::FILLED);
      draw_text(mosaic, text, {tag.x + double(pad), tag.y + double(pad)}, font, kWhite,
                Align::kStart, Align::kStart, text_thickness);
    }
  }
  write_image(path, mosaic);
}

void plot_images(const at::Tensor& images, const at::Tensor& targets,
                 const std::vector<std::string>& paths, const std::vector<std::string>& names,
                 const std::string& path, int max_subplots) {
  if (!images.defined() || images.dim() != 4 || images.size(1) != 3) {
    throw std::invalid_argument("plot '" + path + "': images must be a (bs, 3, h, w) tensor");
  }
  const int64_t bs = std::min<int64_t>(images.size(0), std::max(1, max_subplots));
  at::Tensor im = images.detach().slice(0, 0, bs).to(at::kCPU, at::kFloat);
  if (bs > 0 && im[0].max().item<float>() <= 1) im = im * 255;  // de-normalise as YOLOv5
  im = im.clamp(0, 255).round().to(at::kByte).permute({0, 2, 3, 1}).contiguous();
  std::vector<cv::Mat> mats;
  for (int64_t i = 0; i < bs; ++i) {
    cv::Mat rgb(im.size(1), im.size(2), CV_8UC3, im[i].data_ptr<uint8_t>());
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    mats.push_back(bgr);
  }
  std::vector<PlotTarget> t;
  if (targets.defined() && targets.numel() > 0) {
    if (targets.dim() != 2 || (targets.size(1) != 6 && targets.size(1) != 7)) {
      throw std::invalid_argument("plot '" + path + "': targets must be (n, 6) or (n, 7)");
    }
    const at::Tensor tt = targets.detach().to(at::kCPU, at::kFloat).contiguous();
    const float* d = tt.data_ptr<float>();
    const int64_t cols = tt.size(1);
    for (int64_t r = 0; r < tt.size(0); ++r) {
      const float* row = d + r * cols;
      PlotTarget p;
      p.image = static_cast<int>(row[0]);
      p.cls = static_cast<int>(row[1]);
      p.cx = row[2], p.cy = row[3], p.w = row[4], p.h = row[5];
      // A prediction's confidence is never negative; clamp so it is never taken for a label.
      p.conf = cols == 7 ? std::max(0.0f, row[6]) : -1.0f;
      t.push_back(p);
    }
  }
  plot_images(mats, t, paths, names, path, max_subplots);
}

void plot_results(const std::string& csv_path, const std::string& png_path) {
  const ResultsTable table = read_results_csv(csv_path);
  if (table.columns.size() < 11) {
    throw std::runtime_error(csv_path + ":1: expected YOLOv5's results.csv columns (epoch, " +
                             "train/box_loss, ... val/cls_loss), got " +
                             std::to_string(table.columns.size()) + " columns");
  }
  const double dpi = 200, font = cap_px(12, dpi);
  cv::Mat img(1200, 2400, CV_8UC3, kWhite);
  const std::vector<double> x = table.values("epoch");
  // By position, as YOLOv5's plot: train losses, precision, recall, val losses, mAPs (a model
  // family's loss names differ; their places do not).
  const size_t order[10] = {1, 2, 3, 4, 5, 8, 9, 10, 6, 7};
  for (int i = 0; i < 10; ++i) {
    const size_t j = order[i];
    const std::vector<double> y = table.values(table.columns[j]);
    const std::vector<double> smooth = gaussian_smooth(y, 3.0);
    std::vector<double> both = y;
    both.insert(both.end(), smooth.begin(), smooth.end());
    const auto [x0, x1] = plotting::auto_range(x);
    const auto [y0, y1] = plotting::auto_range(both);
    const cv::Point cell((i % 5) * 480, (i / 5) * 600);
    Axes ax(cv::Rect(cell.x + 110, cell.y + 70, 350, 450), x0, x1, y0, y1);
    ax.draw(img, table.columns[j], "", "", font);
    ax.plot(img, x, y, plotting::tab10(0), 4);
    ax.scatter(img, x, y, plotting::tab10(0), 6);
    ax.plot(img, x, smooth, plotting::tab10(1), 4, /*dotted=*/true);
    if (i == 1) {
      const std::vector<LegendEntry> legend = {{"results", plotting::tab10(0), 4},
                                               {"smooth", plotting::tab10(1), 4, true}};
      const double lf = 0.8 * font;
      const cv::Size ls = plotting::legend_size(legend, lf);
      plotting::draw_legend(img, {ax.box().x + ax.box().width - ls.width - 12, ax.box().y + 12},
                            legend, lf);
    }
  }
  write_image(png_path, img);
}

void plot_pr_curve(const std::vector<double>& px, const std::vector<std::vector<double>>& py,
                   const std::vector<double>& ap50, const std::vector<std::string>& names,
                   const std::string& path) {
  check_curves(px, py, path);
  if (ap50.size() != py.size()) {
    throw std::invalid_argument("plot '" + path + "': " + std::to_string(ap50.size()) +
                                " AP values for " + std::to_string(py.size()) + " classes");
  }
  const bool per_class = !names.empty() && names.size() < 21;
  std::vector<std::string> labels;
  double map50 = 0;
  for (size_t i = 0; i < py.size(); ++i) {
    labels.push_back(class_name(names, i) + " " + format_number("%.3f", ap50[i]));
    map50 += ap50[i] / py.size();
  }
  const std::vector<double> mean = py.empty() ? std::vector<double>{} : mean_curve(py, px.size());
  draw_curves(px, py, labels, per_class, mean,
              "all classes " + format_number("%.3f", map50) + " mAP@0.5", "Precision-Recall Curve",
              "Recall", "Precision", path);
}

void plot_mc_curve(const std::vector<double>& px, const std::vector<std::vector<double>>& curves,
                   const std::vector<std::string>& names, const std::string& path,
                   const std::string& xlabel, const std::string& ylabel) {
  check_curves(px, curves, path);
  const bool per_class = !names.empty() && names.size() < 21;
  std::vector<std::string> labels;
  for (size_t i = 0; i < curves.size(); ++i) labels.push_back(class_name(names, i));
  std::vector<double> mean;
  std::string mean_label;
  if (!curves.empty() && !px.empty()) {
    mean = box_smooth(mean_curve(curves, px.size()), 0.05);
    const size_t best = std::max_element(mean.begin(), mean.end()) - mean.begin();
    mean_label = "all classes " + format_number("%.2f", mean[best]) + " at " +
                 format_number("%.3f", px[best]);
  }
  draw_curves(px, curves, labels, per_class, mean, mean_label, ylabel + "-Confidence Curve", xlabel,
              ylabel, path);
}

void plot_confusion_matrix(const std::vector<std::vector<double>>& matrix,
                           const std::vector<std::string>& names, const std::string& path,
                           bool normalize) {
  const int n = static_cast<int>(matrix.size());
  for (const auto& row : matrix) {
    if (static_cast<int>(row.size()) != n || n == 0) {
      throw std::invalid_argument("plot '" + path + "': the confusion matrix must be square " +
                                  "(nc + 1) x (nc + 1), got " + std::to_string(n) + " rows of " +
                                  std::to_string(row.size()));
    }
  }
  if (n == 0) throw std::invalid_argument("plot '" + path + "': empty confusion matrix");
  const int nc = n - 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> a = matrix;
  double vmax = 0;
  for (int j = 0; j < n; ++j) {
    double col = 0;
    for (int i = 0; i < n; ++i) col += matrix[i][j];
    for (int i = 0; i < n; ++i) {
      double v = normalize ? matrix[i][j] / (col + 1e-9) : matrix[i][j];
      if (!(v >= 0.005)) v = nan;  // blank, as it would read 0.00
      a[i][j] = v;
      if (std::isfinite(v)) vmax = std::max(vmax, v);
    }
  }
  if (vmax <= 0) vmax = 1;

  const double dpi = 250, font = cap_px(12, dpi);
  cv::Mat img(2250, 3000, CV_8UC3, kWhite);
  std::vector<std::string> ticks;
  const bool named = !names.empty() && names.size() < 99 && static_cast<int>(names.size()) == nc;
  for (int i = 0; i < n; ++i) {
    ticks.push_back(named ? (i < nc ? names[i] : "background") : std::to_string(i));
  }
  // Size the square from the space the tick labels leave (below it only when the x labels must
  // be rotated to fit their cells), then shrink the labels to the cells.
  const double base_font = cap_px(nc < 50 ? 10 : 8, dpi);
  const int top = 110;
  double tick_font = base_font, longest = 0, cell = 0;
  int side = 0;
  bool rotate_x = false;
  for (int pass = 0; pass < 2; ++pass) {
    longest = 0;
    for (const auto& t : ticks) {
      longest = std::max<double>(longest, plotting::text_size(t, base_font).width);
    }
    const double below = rotate_x ? std::min(420.0, longest) + 170 : 230;
    side = static_cast<int>(
        std::min(img.rows - top - below, img.cols - std::min(420.0, longest) - 600.0));
    cell = static_cast<double>(side) / n;
    tick_font = std::min(base_font, 0.6 * cell);
    longest = 0;
    for (const auto& t : ticks) {
      longest = std::max<double>(longest, plotting::text_size(t, tick_font).width);
    }
    if (rotate_x || longest <= 0.9 * cell) break;
    rotate_x = true;
  }
  const int left = static_cast<int>(std::min(420.0, longest) + 230);
  const cv::Rect box(left, top, side, side);

  const double annot_font = std::min(cap_px(8, dpi), 0.2 * cell);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (!std::isfinite(a[i][j])) continue;
      const cv::Point p0(std::lround(left + j * cell), std::lround(top + i * cell));
      const cv::Point p1(std::lround(left + (j + 1) * cell), std::lround(top + (i + 1) * cell));
      const cv::Scalar color = plotting::blues(a[i][j] / vmax);
      cv::rectangle(img, p0, p1, color, cv::FILLED);
      if (nc < 30) {
        draw_text(img, format_number("%.2f", a[i][j]), {(p0.x + p1.x) / 2.0, (p0.y + p1.y) / 2.0},
                  annot_font, is_dark(color) ? kWhite : cv::Scalar(38, 38, 38), Align::kCenter,
                  Align::kCenter);
      }
    }
  }
  // Tick labels at cell centres; thin them out when they would overlap (seaborn's "auto").
  std::vector<double> pos;
  std::vector<std::string> labels;
  const int every = named ? 1 : std::max(1, static_cast<int>(std::ceil(2.0 * tick_font / cell)));
  for (int i = 0; i < n; i += every) {
    pos.push_back(i + 0.5);
    labels.push_back(ticks[i]);
  }
  Axes xaxis(box, 0, n, 0, n);  // x: columns (true), left to right
  xaxis.set_xticks(pos, labels, rotate_x);
  std::vector<double> ypos;
  for (double p : pos) ypos.push_back(n - p);  // rows top to bottom
  xaxis.set_yticks(ypos, labels);
  xaxis.draw(img, "Confusion Matrix", "True", "Predicted", font, /*frame=*/false, /*grid=*/false,
             tick_font);

  // Colour bar.
  const cv::Rect bar(left + side + 60, top, 60, side);
  for (int r = 0; r < bar.height; ++r) {
    cv::line(img, cv::Point(bar.x, bar.y + r), cv::Point(bar.x + bar.width - 1, bar.y + r),
             plotting::blues(1.0 - static_cast<double>(r) / (bar.height - 1)));
  }
  const std::vector<double> bt = plotting::nice_ticks(0, vmax, 6);
  for (double t : bt) {
    const double y = bar.y + bar.height - t / vmax * bar.height;
    cv::line(img, cv::Point(bar.x + bar.width, y), cv::Point(bar.x + bar.width + 12, y), kBlack, 2);
    draw_text(img, plotting::format_tick(t, bt), {bar.x + bar.width + 22.0, y}, 0.75 * font, kBlack,
              Align::kStart, Align::kCenter);
  }
  write_image(path, img);
}

void plot_evolve(const std::string& csv_path, const std::string& png_path) {
  const ResultsTable t = read_results_csv(csv_path);
  const size_t nres = val_metric_columns().size();  // then one column per hyperparameter
  if (t.columns.size() <= nres || t.rows.empty()) {
    throw std::runtime_error(csv_path +
                             ": an evolve.csv needs 7 result columns, hyperparameters "
                             "and at least one row");
  }
  std::vector<double> fit;
  const std::vector<double> map50 = t.values("metrics/mAP_0.5"),
                            map = t.values("metrics/mAP_0.5:0.95");
  for (size_t r = 0; r < t.rows.size(); ++r) fit.push_back(0.1 * map50[r] + 0.9 * map[r]);
  const size_t best = std::max_element(fit.begin(), fit.end()) - fit.begin();
  const int n = static_cast<int>(t.columns.size() - nres);
  const int cols = static_cast<int>(std::ceil(std::sqrt(n)));
  const int rows = (n + cols - 1) / cols;
  const int pw = 400, ph = 400;
  cv::Mat img(rows * ph, cols * pw, CV_8UC3, cv::Scalar(255, 255, 255));
  for (int k = 0; k < n; ++k) {
    std::vector<double> x;
    for (const auto& r : t.rows) x.push_back(r[nres + k]);
    const auto [x0, x1] = plotting::auto_range(x);
    const auto [y0, y1] = plotting::auto_range(fit);
    const cv::Rect box((k % cols) * pw + 90, (k / cols) * ph + 50, pw - 120, ph - 110);
    plotting::Axes ax(box, x0, x1, y0, y1);
    ax.scatter(img, x, fit, plotting::blues(0.7), 4);
    ax.scatter(img, {x[best]}, {fit[best]}, cv::Scalar(0, 0, 0), 8);
    ax.draw(img, t.columns[nres + k] + " = " + format_number("%.3g", x[best]), "", "", 14);
  }
  write_image(png_path, img);
}

void plot_val_study(const std::vector<std::string>& files, const std::vector<int>& x,
                    const std::string& png_path) {
  struct Line {
    std::string label;
    std::vector<double> ms, ap;
  };
  std::vector<Line> lines;
  std::vector<double> all_ms, all_ap;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) throw std::runtime_error(f + ": cannot read the study results");
    Line l;
    l.label = fs::path(f).stem().string();
    std::vector<std::pair<double, double>> rows;  // (mAP50-95, inference ms)
    for (std::string row; std::getline(in, row);) {
      std::istringstream ss(row);
      std::vector<double> v;
      for (double d; ss >> d;) v.push_back(d);
      if (v.size() < 10) throw std::runtime_error(f + ": a study row needs 10 values: " + row);
      rows.emplace_back(v[3], v[8]);
    }
    if (rows.size() != x.size()) {
      throw std::runtime_error(f + ": " + std::to_string(rows.size()) + " rows for " +
                               std::to_string(x.size()) + " image sizes");
    }
    const size_t best = static_cast<size_t>(std::max_element(rows.begin(), rows.end()) -
                                            rows.begin());  // by mAP50-95 first
    for (size_t i = 0; i <= best; ++i) {
      l.ms.push_back(rows[i].second);
      l.ap.push_back(rows[i].first * 100);
    }
    all_ms.insert(all_ms.end(), l.ms.begin(), l.ms.end());
    all_ap.insert(all_ap.end(), l.ap.begin(), l.ap.end());
    lines.push_back(std::move(l));
  }
  const double dpi = 300, font = cap_px(10, dpi), legend_font = cap_px(8, dpi);
  cv::Mat img(1200, 2400, CV_8UC3, kWhite);
  const auto [x0, x1] = plotting::auto_range(all_ms);
  const auto [y0, y1] = plotting::auto_range(all_ap);
  const int left = 190, top = 60, bottom = 160, right = 60;
  Axes ax(cv::Rect(left, top, img.cols - left - right, img.rows - top - bottom), x0, x1, y0, y1);
  ax.draw(img, "", "Inference (ms/img)", "AP val (mAP50-95 x 100)", font, true, true);
  std::vector<LegendEntry> legend;
  for (size_t i = 0; i < lines.size(); ++i) {
    ax.plot(img, lines[i].ms, lines[i].ap, plotting::tab10(static_cast<int>(i)), 5);
    ax.scatter(img, lines[i].ms, lines[i].ap, plotting::tab10(static_cast<int>(i)), 10);
    legend.push_back({lines[i].label, plotting::tab10(static_cast<int>(i)), 5});
  }
  const cv::Size ls = plotting::legend_size(legend, legend_font);
  plotting::draw_legend(
      img, cv::Point(img.cols - right - ls.width - 30, img.rows - bottom - ls.height - 30), legend,
      legend_font);
  write_image(png_path, img);
}

}  // namespace yolo

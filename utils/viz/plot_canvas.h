#pragma once
// A small matplotlib-like drawing layer over OpenCV, shared by utils/plots.cpp: aligned and rotated
// text, "nice" tick positions, axes that map data to pixels (frame, ticks, grid, labels, title),
// solid or dotted polylines, colour maps and legends. Canvases are CV_8UC3, colours BGR.
#include <opencv2/core.hpp>
#include <string>
#include <utility>
#include <vector>

namespace yolo::plotting {

enum class Align { kStart, kCenter, kEnd };

// Size of `text` drawn with a cap height of `height_px` pixels (descenders not included).
cv::Size text_size(const std::string& text, double height_px, int thickness = 1);

// Draws `text` so that its box is aligned to `anchor` (h: left/centre/right, v: top/centre/bottom).
// `vertical` rotates it 90 degrees counter-clockwise (reads bottom to top); the alignment then
// refers to the rotated box.
void draw_text(cv::Mat& img, const std::string& text, cv::Point2d anchor, double height_px,
               const cv::Scalar& color, Align h = Align::kStart, Align v = Align::kStart,
               int thickness = 1, bool vertical = false);

// Round tick positions (steps of 1, 2, 2.5 or 5 times a power of ten) inside [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 6);
// Tick label with just enough decimals to tell `ticks` apart.
std::string format_tick(double value, const std::vector<double>& ticks);

// [min, max] of the finite values widened by `margin` of the span, as matplotlib's autoscale;
// [0, 1] when there is no finite value and +-0.5 around a single value.
std::pair<double, double> auto_range(const std::vector<double>& v, double margin = 0.05);

// Colour maps and cycles (BGR).
cv::Scalar blues(double t);  // matplotlib's 'Blues', t in [0, 1]
cv::Scalar tab10(int i);     // matplotlib's default line colour cycle C0..C9

class Axes {
 public:
  Axes(const cv::Rect& box, double x0, double x1, double y0, double y1);

  const cv::Rect& box() const { return box_; }
  cv::Point2d to_px(double x, double y) const;

  // Custom tick positions and labels (e.g. class names); `vertical` rotates the x labels.
  void set_xticks(std::vector<double> pos, std::vector<std::string> labels, bool vertical = false);
  void set_yticks(std::vector<double> pos, std::vector<std::string> labels);

  // Frame (optional), ticks with labels, grid (optional), axis labels and title; `font_px` is the
  // cap height of the title, the rest is scaled from it; `tick_px` > 0 overrides the tick labels'.
  void draw(cv::Mat& img, const std::string& title, const std::string& xlabel,
            const std::string& ylabel, double font_px, bool frame = true, bool grid = false,
            double tick_px = 0) const;

  // Polyline through the points; a non-finite value breaks the line. Clipped to the box.
  void plot(cv::Mat& img, const std::vector<double>& x, const std::vector<double>& y,
            const cv::Scalar& color, int thickness, bool dotted = false) const;
  // Filled dots at the finite points inside the box.
  void scatter(cv::Mat& img, const std::vector<double>& x, const std::vector<double>& y,
               const cv::Scalar& color, int radius) const;

 private:
  cv::Rect box_;
  double x0_, x1_, y0_, y1_;
  std::vector<double> xtick_pos_, ytick_pos_;
  std::vector<std::string> xtick_labels_, ytick_labels_;
  bool xtick_vertical_ = false;
};

struct LegendEntry {
  std::string label;
  cv::Scalar color;
  int thickness = 2;
  bool dotted = false;
};

// Legend box (line sample + label per row) with its top-left corner at `top_left`.
cv::Size legend_size(const std::vector<LegendEntry>& entries, double font_px);
void draw_legend(cv::Mat& img, cv::Point top_left, const std::vector<LegendEntry>& entries,
                 double font_px);

}  // namespace yolo::plotting

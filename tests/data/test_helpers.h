#pragma once
// Shared fixtures for the data tests: temporary folders and tiny generated datasets.
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "data/labels.h"

namespace yolo::test {

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

void write_text(const std::string& path, const std::string& text);
void write_image(const std::string& path, const cv::Mat& image);

// An image of size w x h with a flat background and one filled rectangle `box` (pixels) in
// `colour`; returns the matching YOLO label.
Label draw_box_image(cv::Mat& image, int w, int h, const cv::Rect& box, const cv::Scalar& colour,
                     int cls = 0);

// Writes n images root/images/<split>/im<i>.png (w x h, one coloured box each, class i % nc)
// with labels in root/labels/<split>/.
void make_split(const std::string& root, const std::string& split, int n, int w, int h, int nc = 2);

// Bounding box of pixels within `tol` of `colour` (per channel); empty Rect when none.
cv::Rect colour_bbox(const cv::Mat& image, const cv::Scalar& colour, int tol = 40);

}  // namespace yolo::test

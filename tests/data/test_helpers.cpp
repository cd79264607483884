#include "test_helpers.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

namespace fs = std::filesystem;

namespace yolo::test {

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "yolo_data_test_XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(path_, ec);
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_image(const std::string& path, const cv::Mat& image) {
  fs::create_directories(fs::path(path).parent_path());
  if (!cv::imwrite(path, image)) throw std::runtime_error("cannot write " + path);
}

Label draw_box_image(cv::Mat& image, int w, int h, const cv::Rect& box, const cv::Scalar& colour,
                     int cls) {
  image = cv::Mat(h, w, CV_8UC3, cv::Scalar(40, 40, 40));
  cv::rectangle(image, box, colour, cv::FILLED);
  return {float(cls), (box.x + box.width / 2.f) / w, (box.y + box.height / 2.f) / h,
          float(box.width) / w, float(box.height) / h};
}

void make_split(const std::string& root, const std::string& split, int n, int w, int h, int nc) {
  for (int i = 0; i < n; ++i) {
    cv::Mat im;
    const cv::Rect box(5 + (i * 7) % (w / 2), 5 + (i * 5) % (h / 2), w / 3, h / 3);
    const Label l = draw_box_image(im, w, h, box, cv::Scalar(0, 0, 255), i % nc);
    const std::string stem = "im" + std::to_string(i);
    write_image(root + "/images/" + split + "/" + stem + ".png", im);
    char line[128];
    std::snprintf(line, sizeof line, "%d %.6f %.6f %.6f %.6f\n", int(l.cls), l.cx, l.cy, l.w, l.h);
    write_text(root + "/labels/" + split + "/" + stem + ".txt", line);
  }
}

cv::Rect colour_bbox(const cv::Mat& image, const cv::Scalar& colour, int tol) {
  cv::Mat mask;
  cv::inRange(image, cv::Scalar(colour[0] - tol, colour[1] - tol, colour[2] - tol),
              cv::Scalar(colour[0] + tol, colour[1] + tol, colour[2] + tol), mask);
  if (cv::countNonZero(mask) == 0) return {};
  return cv::boundingRect(mask);
}

}  // namespace yolo::test

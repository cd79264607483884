#include "data/shapes_dataset.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "utils/core/log.h"

namespace fs = std::filesystem;

namespace yolo {
namespace {

int rand_int(std::mt19937& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

cv::Scalar rand_colour(std::mt19937& rng) {
  return cv::Scalar(rand_int(rng, 0, 255), rand_int(rng, 0, 255), rand_int(rng, 0, 255));
}

cv::Mat make_background(std::mt19937& rng, int w, int h) {
  cv::Mat img(h, w, CV_8UC3);
  switch (rand_int(rng, 0, 3)) {
    case 0: {  // flat colour plus noise
      img.setTo(rand_colour(rng));
      cv::Mat noise(h, w, CV_8UC3);
      cv::randn(noise, cv::Scalar::all(0), cv::Scalar::all(rand_int(rng, 2, 20)));
      cv::add(img, noise, img);
      break;
    }
    case 1: {  // linear gradient between two colours
      const cv::Scalar a = rand_colour(rng), b = rand_colour(rng);
      const bool vertical = rand_int(rng, 0, 1);
      for (int y = 0; y < h; ++y) {
        auto* row = img.ptr<cv::Vec3b>(y);
        for (int x = 0; x < w; ++x) {
          const double t = vertical ? double(y) / (h - 1) : double(x) / (w - 1);
          for (int c = 0; c < 3; ++c)
            row[x][c] = cv::saturate_cast<uchar>(a[c] * (1 - t) + b[c] * t);
        }
      }
      break;
    }
    case 2: {  // blurred colour noise
      cv::randu(img, cv::Scalar::all(0), cv::Scalar::all(256));
      cv::GaussianBlur(img, img, cv::Size(0, 0), rand_int(rng, 1, 6));
      break;
    }
    default: {  // stripes
      img.setTo(rand_colour(rng));
      const cv::Scalar c = rand_colour(rng);
      const int period = rand_int(rng, 8, 32);
      for (int x = 0; x < w; x += period) {
        cv::rectangle(img, cv::Rect(x, 0, period / 2, h), c, cv::FILLED);
      }
      break;
    }
  }
  return img;
}

// Draws one shape of class `cls` inside `area` into img and returns the exact pixel bbox.
cv::Rect draw_shape(std::mt19937& rng, cv::Mat& img, int cls, const cv::Rect& area) {
  cv::Mat mask = cv::Mat::zeros(img.size(), CV_8U);
  const cv::Scalar colour = rand_colour(rng);
  if (cls == 0) {
    const int r = std::min(area.width, area.height) / 2;
    const cv::Point c(area.x + area.width / 2, area.y + area.height / 2);
    cv::circle(mask, c, r, cv::Scalar(255), cv::FILLED, cv::LINE_8);
  } else if (cls == 1) {
    cv::rectangle(mask, area, cv::Scalar(255), cv::FILLED, cv::LINE_8);
  } else {
    const cv::Point pts[3] = {
        {area.x + rand_int(rng, 0, area.width - 1), area.y},
        {area.x, area.y + area.height - 1},
        {area.x + area.width - 1, area.y + area.height - 1 - rand_int(rng, 0, area.height / 3)}};
    cv::fillConvexPoly(mask, pts, 3, cv::Scalar(255), cv::LINE_8);
  }
  img.setTo(colour, mask);
  return cv::boundingRect(mask);
}

void write_split(const fs::path& root, const std::string& split, int count, int width,
                 uint64_t seed) {
  const fs::path img_dir = root / "images" / split, lbl_dir = root / "labels" / split;
  fs::create_directories(img_dir);
  fs::create_directories(lbl_dir);
  for (int i = 0; i < count; ++i) {
    std::mt19937 rng(static_cast<uint32_t>(seed * 1000003u + (split == "val" ? 7919u : 0u) + i));
    const int h = 160 + 16 * rand_int(rng, 0, 6);
    cv::Mat img = make_background(rng, width, h);
    std::vector<cv::Rect> placed;
    std::ostringstream labels;
    const int n = rand_int(rng, 1, 4);
    for (int k = 0, tries = 0; k < n && tries < 50; ++tries) {
      const int sw = rand_int(rng, 20, 90), sh = rand_int(rng, 20, 90);
      const cv::Rect area(rand_int(rng, 0, width - sw), rand_int(rng, 0, h - sh), sw, sh);
      bool overlaps = false;  // shapes never overlap, so every box stays exact
      for (const auto& p : placed) {
        const cv::Rect grown(p.x - 2, p.y - 2, p.width + 4, p.height + 4);
        if ((grown & area).area() > 0) overlaps = true;
      }
      if (overlaps) continue;
      const int cls = rand_int(rng, 0, 2);
      const cv::Rect box = draw_shape(rng, img, cls, area);
      placed.push_back(area);
      char line[128];
      std::snprintf(line, sizeof line, "%d %.6f %.6f %.6f %.6f\n", cls,
                    (box.x + box.width / 2.0) / width, (box.y + box.height / 2.0) / h,
                    double(box.width) / width, double(box.height) / h);
      labels << line;
      ++k;
    }
    char stem[32];
    std::snprintf(stem, sizeof stem, "%s_%05d", split.c_str(), i);
    if (!cv::imwrite((img_dir / (std::string(stem) + ".png")).string(), img)) {
      throw std::runtime_error("cannot write " + (img_dir / stem).string() + ".png");
    }
    std::ofstream out(lbl_dir / (std::string(stem) + ".txt"));
    out << labels.str();
    if (!out) throw std::runtime_error("cannot write labels in " + lbl_dir.string());
  }
}

}  // namespace

std::vector<std::string> shapes_class_names() { return {"circle", "rectangle", "triangle"}; }

void ensure_shapes_dataset(const std::string& root, const ShapesSpec& spec) {
  std::error_code ec;
  if (fs::exists(root, ec)) return;  // only ever appears complete, through the rename below
  const fs::path target = fs::path(root).lexically_normal();
  fs::create_directories(target.parent_path(), ec);
  if (ec) {
    throw std::runtime_error("cannot create " + target.parent_path().string() + ": " +
                             ec.message() + "; make it writable or set 'path' elsewhere");
  }
  std::ostringstream tmp_name;
  tmp_name << "." << target.filename().string() << ".tmp-" << getpid() << "-"
           << std::hash<std::thread::id>()(std::this_thread::get_id());
  const fs::path tmp = target.parent_path() / tmp_name.str();
  log_info("Generating the shapes dataset (" + std::to_string(spec.train) + " train, " +
           std::to_string(spec.val) + " val images) in " + target.string() + " ...");
  try {
    fs::remove_all(tmp, ec);
    write_split(tmp, "train", spec.train, spec.width, spec.seed);
    write_split(tmp, "val", spec.val, spec.width, spec.seed);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove_all(tmp);
    if (!fs::exists(target)) {
      throw std::runtime_error("cannot create " + target.string() + ": " + ec.message());
    }
    // Another process finished first; its identical copy is kept.
  }
}

}  // namespace yolo

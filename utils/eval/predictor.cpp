#include "utils/eval/predictor.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "data/file_lists.h"
#include "data/image_io.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/progress.h"
#include "utils/core/stopwatch.h"
#include "utils/eval/yolo_txt.h"
#include "utils/viz/plots.h"
#include "yolo/detector.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {
bool is_image(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), ::tolower);
  static const std::vector<std::string> kExt = {".bmp", ".jpg",  ".jpeg", ".png",
                                                ".tif", ".tiff", ".webp", ".pfm"};
  return std::find(kExt.begin(), kExt.end(), e) != kExt.end();
}

void draw_box(cv::Mat& im, const cv::Rect2f& box, const std::string& label, int cls, int lw) {
  const cv::Scalar color = class_color(cls);
  cv::rectangle(im, cv::Point(box.x, box.y), cv::Point(box.x + box.width, box.y + box.height),
                color, lw, cv::LINE_AA);
  if (label.empty()) return;  // --hide-labels
  const double fs = std::max(lw - 1, 1) / 3.0;
  int base = 0;
  const cv::Size ts =
      cv::getTextSize(label, cv::FONT_HERSHEY_SIMPLEX, fs, std::max(lw - 1, 1), &base);
  const bool outside = box.y - ts.height >= 3;
  const cv::Point p1(box.x, outside ? box.y - ts.height - 3 : box.y);
  cv::rectangle(im, p1, cv::Point(p1.x + ts.width, p1.y + ts.height + 3), color, cv::FILLED);
  cv::putText(im, label, cv::Point(p1.x, p1.y + ts.height + 1), cv::FONT_HERSHEY_SIMPLEX, fs,
              cv::Scalar(255, 255, 255), std::max(lw - 1, 1), cv::LINE_AA);
}
// YOLOv5's save_one_box (gain 1.02, pad 10 px, BGR): the box grown about its centre, truncated to
// whole pixels and clipped to the image, saved as a quality-95 JPEG under the first free name
// stem.jpg, stem2.jpg, ... of its class folder.
void save_crop(const cv::Mat& im, const Detection& d, const fs::path& dir,
               const std::string& stem) {
  const float cx = (d.x1 + d.x2) / 2, cy = (d.y1 + d.y2) / 2;
  const float w = (d.x2 - d.x1) * 1.02f + 10, h = (d.y2 - d.y1) * 1.02f + 10;
  const auto clip = [](float v, int hi) {
    return std::clamp(static_cast<int>(static_cast<int64_t>(v)), 0, hi);
  };
  const int x1 = clip(cx - w / 2, im.cols), x2 = clip(cx + w / 2, im.cols);
  const int y1 = clip(cy - h / 2, im.rows), y2 = clip(cy + h / 2, im.rows);
  if (x2 <= x1 || y2 <= y1) return;
  fs::create_directories(dir);
  fs::path file = dir / (stem + ".jpg");
  for (int n = 2; fs::exists(file); ++n) file = dir / (stem + std::to_string(n) + ".jpg");
  std::vector<int> params = {cv::IMWRITE_JPEG_QUALITY, 95};
#if CV_VERSION_MAJOR > 4 || (CV_VERSION_MAJOR == 4 && CV_VERSION_MINOR >= 7)  // 4:4:4 as PIL's
  params.insert(params.end(),
                {cv::IMWRITE_JPEG_SAMPLING_FACTOR, cv::IMWRITE_JPEG_SAMPLING_FACTOR_444});
#endif
  if (!cv::imwrite(file.string(), im(cv::Range(y1, y2), cv::Range(x1, x2)), params)) {
    throw std::runtime_error(file.string() + ": cannot write the crop");
  }
}
}  // namespace

std::vector<std::string> expand_source(const std::string& source) {
  if (source.empty()) throw UsageError("--source: required (an image, folder, glob or .txt list)");
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(source, ec)) {
    for (const auto& e : fs::directory_iterator(source)) {
      if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
    }
  } else if (fs::is_regular_file(source, ec) && fs::path(source).extension() == ".txt") {
    files = list_image_files({source});
  } else if (fs::is_regular_file(source, ec)) {
    files.push_back(source);
  } else if (source.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    if (::glob(source.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        if (is_image(g.gl_pathv[i])) files.push_back(g.gl_pathv[i]);
      }
    }
    ::globfree(&g);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw UsageError("--source: no images found at '" + source + "'");
  return files;
}

std::string run_detect(const DetectConfig& cfg) {
  const std::vector<std::string> files = expand_source(cfg.source);
  DetectorOptions o;
  o.device = cfg.device;
  o.imgsz = cfg.imgsz;
  o.conf_thres = static_cast<float>(cfg.conf_thres);
  o.iou_thres = static_cast<float>(cfg.iou_thres);
  o.max_det = cfg.max_det;
  o.classes = cfg.classes;
  o.cfg = cfg.cfg;
  o.verbose = true;
  o.agnostic_nms = cfg.agnostic_nms;
  o.half = cfg.half;
  o.augment = cfg.augment;
  if (!cfg.data.empty()) o.data = resolve_config(cfg.data, ConfigKind::kData, "--data");
  Detector detector(cfg.weights, o);
  const std::vector<std::string>& names = detector.names();
  const std::string save_dir =
      increment_path((fs::path(cfg.project) / cfg.name).string(), cfg.exist_ok, true);
  if (cfg.save_txt) fs::create_directories(fs::path(save_dir) / "labels");
  const Stopwatch clock;
  for (size_t i = 0; i < files.size(); ++i) {
    const Stopwatch t0;
    cv::Mat im0 = read_image(files[i]);  // throws naming the file when unreadable
    const std::vector<Detection> det = detector.detect(im0);
    const double ms = t0.milliseconds();
    std::map<int, int> counts;
    const fs::path src(files[i]);
    if (cfg.save_crop) {  // from the image before boxes are drawn, in YOLOv5's order
      for (auto d = det.rbegin(); d != det.rend(); ++d) {
        save_crop(im0, *d, fs::path(save_dir) / "crops" / class_name(names, d->class_id),
                  src.stem().string());
      }
    }
    if (cfg.save_txt) {
      write_yolo_txt((fs::path(save_dir) / "labels" / (src.stem().string() + ".txt")).string(), det,
                     im0.cols, im0.rows, cfg.save_conf);
    }
    for (const Detection& d : det) {
      ++counts[d.class_id];
      if (!cfg.nosave) {
        // YOLOv5's label: "name 0.87", "name" with --hide-conf, none with --hide-labels.
        std::string label = cfg.hide_labels ? "" : class_name(names, d.class_id);
        if (!cfg.hide_labels && !cfg.hide_conf) {
          char conf[16];
          std::snprintf(conf, sizeof(conf), " %.2f", d.confidence);
          label += conf;
        }
        draw_box(im0, cv::Rect2f(d.x1, d.y1, d.x2 - d.x1, d.y2 - d.y1), label, d.class_id,
                 cfg.line_thickness);
      }
    }
    if (!cfg.nosave) {
      const std::string out = (fs::path(save_dir) / src.filename()).string();
      if (!cv::imwrite(out, im0)) throw std::runtime_error(out + ": cannot write the image");
    }
    const cv::Size input = detector.input_size(im0.size());
    std::string s = "image " + std::to_string(i + 1) + "/" + std::to_string(files.size()) + " " +
                    files[i] + ": " + std::to_string(input.height) + "x" +
                    std::to_string(input.width) + " ";
    if (counts.empty()) s += "(no detections), ";
    for (const auto& [c, n] : counts) {
      s += std::to_string(n) + " " + class_name(names, c) + (n > 1 ? "s" : "") + ", ";
    }
    // YOLOv5's line per image, with the run's elapsed time and ETA as its progress bars show them.
    const double elapsed = clock.seconds();
    const double eta =
        elapsed / static_cast<double>(i + 1) * static_cast<double>(files.size() - i - 1);
    char t[32];
    std::snprintf(t, sizeof(t), "%.1fms", ms);
    log_info(s + t + " [" + format_duration(elapsed) + "<" + format_duration(eta) + "]");
  }
  log_info("Results saved to " + save_dir);
  return save_dir;
}

}  // namespace yolo

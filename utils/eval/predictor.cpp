#include "utils/eval/predictor.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#ifdef YOLO_WITH_OPENCV_VIDEOIO
#include <opencv2/videoio.hpp>
#endif

#include "utils/core/cpu_threads.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/progress.h"
#include "utils/core/stopwatch.h"
#include "utils/eval/media_source.h"
#include "utils/eval/yolo_txt.h"
#include "utils/viz/plots.h"
#include "yolo/detector.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {
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

// Annotated videos: one writer per output (a file source's videos one after another, a stream's
// for the whole run), each finished when its source moves on or the run ends, then read back:
// VideoWriter reports no failed write, and a full disk or a file size limit would otherwise leave
// an unreadable file behind a "Results saved" line.
class VideoSink {
 public:
  void write(int slot, const fs::path& out, const cv::Mat& im, double fps) {
#ifdef YOLO_WITH_OPENCV_VIDEOIO
    auto it = writers_.find(slot);
    if (it == writers_.end() || it->second.path != out) {
      if (it != writers_.end()) finish(it->second);
      Output o{out,
               cv::VideoWriter(out.string(), cv::VideoWriter::fourcc('m', 'p', '4', 'v'), fps,
                               im.size()),
               im.size()};
      if (!o.writer.isOpened()) throw std::runtime_error(out.string() + ": cannot write the video");
      it = writers_.insert_or_assign(slot, std::move(o)).first;
    }
    if (im.size() == it->second.size) {
      it->second.writer.write(im);
    } else {  // a stream whose frame size changed: a writer drops frames of another size
      cv::Mat resized;
      cv::resize(im, resized, it->second.size);
      it->second.writer.write(resized);
    }
#else
    (void)slot, (void)out, (void)im, (void)fps;
#endif
  }
  ~VideoSink() {
    try {
      close();
    } catch (const std::exception& e) {
      log_error(e.what());
    }
  }
  // Finishes every video and checks that each reads back; throws naming the first that does not.
  void close() {
#ifdef YOLO_WITH_OPENCV_VIDEOIO
    std::string error;
    for (auto& [slot, o] : writers_) {
      try {
        finish(o);
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
    writers_.clear();
    if (!error.empty()) throw std::runtime_error(error);
#endif
  }

 private:
#ifdef YOLO_WITH_OPENCV_VIDEOIO
  struct Output {
    fs::path path;
    cv::VideoWriter writer;
    cv::Size size;
  };
  static void finish(Output& o) {
    o.writer.release();
    cv::VideoCapture check(o.path.string(), cv::CAP_ANY);
    if (!check.isOpened() || !check.grab()) {
      throw std::runtime_error(o.path.string() +
                               ": the video was not written completely and cannot be read "
                               "(is the disk full, or a file size limit set?)");
    }
  }
  std::map<int, Output> writers_;
#endif
};

DetectorOptions detector_options(const DetectConfig& cfg) {
  if (cfg.imgsz.empty() || cfg.imgsz.size() > 2) {
    throw UsageError("--imgsz: one number (square) or two (height width), got " +
                     std::to_string(cfg.imgsz.size()));
  }
  for (int v : cfg.imgsz) {
    if (v < 1) throw UsageError("--imgsz: sizes must be >= 1, got " + std::to_string(v));
  }
  DetectorOptions o;
  o.device = cfg.device;
  o.imgsz = cfg.imgsz[0];
  o.imgsz_width = cfg.imgsz.size() > 1 ? cfg.imgsz[1] : 0;
  o.conf_thres = static_cast<float>(cfg.conf_thres);
  o.iou_thres = static_cast<float>(cfg.iou_thres);
  o.max_det = cfg.max_det;
  o.classes = cfg.classes;
  o.cfg = cfg.cfg;
  o.verbose = true;
  o.agnostic_nms = cfg.agnostic_nms;
  o.half = cfg.half;
  o.augment = cfg.augment;
  o.end2end = cfg.end2end;
  if (!cfg.data.empty()) o.data = resolve_config(cfg.data, ConfigKind::kData, "--data");
  return o;
}

// YOLOv5's per-image line start: "image 2/8 a.jpg: ", "video 1/1 (3/20) v.mp4: ", "0: ".
std::string frame_header(const SourceFrame& f) {
  switch (f.kind) {
    case SourceFrame::Kind::kImage:
      return "image " + std::to_string(f.index + 1) + "/" + std::to_string(f.count) + " " + f.path +
             ": ";
    case SourceFrame::Kind::kVideo:
      return "video " + std::to_string(f.index + 1) + "/" + std::to_string(f.count) + " (" +
             std::to_string(f.frame) + "/" + std::to_string(f.frames) + ") " + f.path + ": ";
    case SourceFrame::Kind::kStream:
      break;
  }
  return std::to_string(f.index) + ": ";
}

// What detect writes for one frame (crops, labels, the annotated image or video frame); returns
// the per-class counts for its line.
std::map<int, int> save_results(const DetectConfig& cfg, const std::vector<std::string>& names,
                                const fs::path& save_dir, SourceFrame& f,
                                const std::vector<Detection>& det, VideoSink& videos) {
  cv::Mat& im0 = f.image;
  const std::string stem = fs::path(f.name).stem().string();
  if (cfg.save_crop) {  // from the image before boxes are drawn, in YOLOv5's order
    for (auto d = det.rbegin(); d != det.rend(); ++d) {
      save_crop(im0, *d, save_dir / "crops" / safe_file_name(class_name(names, d->class_id)), stem);
    }
  }
  // Only frames with detections get a file, as YOLOv5's; videos and streams one per frame,
  // stem_<frame>.txt.
  if (cfg.save_txt && !det.empty()) {
    const std::string txt =
        stem + (f.kind == SourceFrame::Kind::kImage ? "" : "_" + std::to_string(f.frame)) + ".txt";
    write_yolo_txt((save_dir / "labels" / txt).string(), det, im0.cols, im0.rows, cfg.save_conf);
  }
  std::map<int, int> counts;
  for (const Detection& d : det) {
    ++counts[d.class_id];
    if (cfg.nosave) continue;
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
  if (cfg.nosave) return counts;
  if (f.kind == SourceFrame::Kind::kImage) {
    const std::string out = (save_dir / f.name).string();
    if (!cv::imwrite(out, im0)) throw std::runtime_error(out + ": cannot write the image");
  } else {  // the annotated video, as <name>.mp4 at the source's frame rate
    const int slot = f.kind == SourceFrame::Kind::kStream ? f.index : -1;
    videos.write(slot, save_dir / fs::path(f.name).replace_extension(".mp4"), im0, f.fps);
  }
  return counts;
}

// A class the model does not have filters everything of it out: a run that can find nothing the
// user asked for is refused before it starts, naming the class.
void check_classes(const std::vector<int>& classes, const std::vector<std::string>& names) {
  for (int c : classes) {
    if (c < 0 || c >= static_cast<int>(names.size())) {
      throw UsageError("--classes " + std::to_string(c) + ": the model has " +
                       std::to_string(names.size()) + " classes (0-" +
                       std::to_string(names.size() - 1) + "), so nothing of class " +
                       std::to_string(c) + " can be found");
    }
  }
}
}  // namespace

std::string run_detect(const DetectConfig& cfg) {
  if (cfg.batch_size < 1) throw UsageError("--batch-size: must be >= 1");
  SourceOptions so;
  so.vid_stride = cfg.vid_stride;
  so.stream_buffer = cfg.stream_buffer;
  Detector detector(cfg.weights, detector_options(cfg));
  if (detector.device() == "cpu") start_threads_on_cpu();
  const std::vector<std::string>& names = detector.names();
  check_classes(cfg.classes, names);
  std::unique_ptr<FrameSource> source = open_source(cfg.source, so);
  const fs::path save_dir =
      increment_path((fs::path(cfg.project) / cfg.name).string(), cfg.exist_ok, true);
  if (cfg.save_txt) fs::create_directories(save_dir / "labels");
  const Stopwatch clock;
  VideoSink videos;
  std::vector<SourceFrame> batch;
  std::vector<cv::Mat> images;
  int64_t seen = 0;
  double total_ms = 0;
  while (batch.clear(), source->next(batch, cfg.batch_size)) {
    images.clear();
    for (const SourceFrame& f : batch) images.push_back(f.image);
    const Stopwatch t0;
    const std::vector<std::vector<Detection>> dets = detector.detect(images);
    const double ms = t0.milliseconds() / static_cast<double>(batch.size());
    const cv::Size input = detector.input_size(images);
    total_ms += t0.milliseconds();
    for (size_t i = 0; i < batch.size(); ++i) {
      SourceFrame& f = batch[i];
      const std::map<int, int> counts = save_results(cfg, names, save_dir, f, dets[i], videos);
      std::string s =
          frame_header(f) + std::to_string(input.height) + "x" + std::to_string(input.width) + " ";
      if (counts.empty()) s += "(no detections), ";
      for (const auto& [c, n] : counts) {
        s += std::to_string(n) + " " + class_name(names, c) + (n > 1 ? "s" : "") + ", ";
      }
      // YOLOv5's line per image, with the run's elapsed time (and for images its ETA) as its
      // progress bars show them.
      ++seen;
      const double elapsed = clock.seconds();
      std::string when = format_duration(elapsed);
      if (f.kind == SourceFrame::Kind::kImage) {
        when += "<" + format_duration(elapsed / static_cast<double>(f.index + 1) *
                                      static_cast<double>(f.count - f.index - 1));
      }
      char t[32];
      std::snprintf(t, sizeof(t), "%.1fms", ms);
      log_info(one_line(s) + t + " [" + when + "]");
    }
  }
  videos.close();  // finishes and checks every video, also after a signal
  if (const int sig = source->interrupted()) {
    throw std::runtime_error(std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                             ": detect stopped after " + std::to_string(seen) +
                             " frame(s); what they gave is saved in " + save_dir.string() +
                             " (videos finished and readable)");
  }
  if (seen == 0 && source->streams() == 0) {
    throw std::runtime_error("--source " + cfg.source +
                             ": no image or video frame could be read (see the warnings above)");
  }
  std::string saved = "Results saved to " + one_line(save_dir.string());
  if (cfg.save_txt) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(save_dir / "labels")) n += e.is_regular_file();
    saved +=
        "\n" + std::to_string(n) + " labels saved to " + one_line((save_dir / "labels").string());
  }
  if (seen > 0) {
    char speed[96];
    std::snprintf(speed, sizeof(speed), "Speed: %.1fms per image (pre-process, inference, NMS)",
                  total_ms / static_cast<double>(seen));
    log_info(speed);
  }
  log_info(saved);
  return save_dir.string();
}

}  // namespace yolo

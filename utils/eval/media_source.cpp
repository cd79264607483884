#include "utils/eval/media_source.h"

#include <glob.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "data/file_lists.h"
#include "data/image_io.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"

#ifdef YOLO_WITH_OPENCV_VIDEOIO
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/videoio.hpp>
#include <opencv2/videoio/registry.hpp>
#endif

namespace fs = std::filesystem;

namespace yolo {

namespace {

std::string lower_extension(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), ::tolower);
  return e;
}

bool is_image(const fs::path& p) {
  static const std::vector<std::string> kExt = {".bmp",  ".jpg",  ".jpeg", ".png", ".tif",
                                                ".tiff", ".webp", ".pfm",  ".dng", ".mpo"};
  const std::string e = lower_extension(p);
  return std::find(kExt.begin(), kExt.end(), e) != kExt.end();
}

// YOLOv5's VID_FORMATS.
bool is_video(const fs::path& p) {
  static const std::vector<std::string> kExt = {".asf", ".avi",  ".gif", ".m4v", ".mkv", ".mov",
                                                ".mp4", ".mpeg", ".mpg", ".ts",  ".wmv"};
  const std::string e = lower_extension(p);
  return std::find(kExt.begin(), kExt.end(), e) != kExt.end();
}

const char kNoVideoIo[] =
    "this build reads no video: OpenCV's videoio module was not found when it was built "
    "(Debian: apt install libopencv-videoio-dev, then rebuild)";

bool is_url(const std::string& s) {
  static const char* kSchemes[] = {"rtsp://",  "rtsps://", "rtmp://", "http://",
                                   "https://", "file://",  "udp://",  "tcp://"};
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  return std::any_of(std::begin(kSchemes), std::end(kSchemes),
                     [&](const char* k) { return l.rfind(k, 0) == 0; });
}

bool is_webcam_index(const std::string& s) {
  return !s.empty() && s.size() < 4 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

#ifdef YOLO_WITH_OPENCV_VIDEOIO
// Opens a file or URL through FFmpeg (as YOLOv5's OpenCV does), a webcam index through any
// backend. OpenCV's own log lines about backends it tried and gave up on are kept quiet: the
// caller says what could not be opened.
bool open_capture(cv::VideoCapture& cap, const std::string& source) {
  namespace logging = cv::utils::logging;
  const logging::LogLevel was = logging::setLogLevel(logging::LOG_LEVEL_SILENT);
  bool ok = false;
  if (is_webcam_index(source)) {
    ok = cap.open(std::stoi(source));
  } else {
    ok = cap.open(source,
                  cv::videoio_registry::hasBackend(cv::CAP_FFMPEG) ? cv::CAP_FFMPEG : cv::CAP_ANY);
  }
  logging::setLogLevel(was);
  return ok && cap.isOpened();
}
#endif

// SIGINT and SIGTERM end a source's loop (so written videos are finished) while one is open; a
// second signal acts as the default would.
std::atomic<int> g_interrupted{0};
extern "C" void on_interrupt(int sig) {
  g_interrupted.store(sig);
  std::signal(sig, SIG_DFL);
}

// Installs on_interrupt for SIGINT and SIGTERM while it lives.
class InterruptHandler {
 public:
  InterruptHandler() {
    g_interrupted.store(0);
    old_int_ = std::signal(SIGINT, on_interrupt);
    old_term_ = std::signal(SIGTERM, on_interrupt);
  }
  ~InterruptHandler() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

 private:
  void (*old_int_)(int) = SIG_DFL;
  void (*old_term_)(int) = SIG_DFL;
};

}  // namespace

std::vector<std::string> output_names(const std::vector<std::string>& files) {
  std::set<std::string> stems;
  std::vector<std::string> out;
  for (const std::string& file : files) {
    const fs::path p(file);
    const std::string stem = p.stem().string(), ext = p.extension().string();
    std::string name = stem;
    if (stems.count(name)) name = stem + (ext.size() > 1 ? "_" + ext.substr(1) : "");
    for (int n = 2; stems.count(name); ++n) {
      name = stem + (ext.size() > 1 ? "_" + ext.substr(1) : "") + "_" + std::to_string(n);
    }
    stems.insert(name);
    out.push_back(name + ext);
  }
  return out;
}

namespace {

// Images and videos from files, in LoadImages' order.
class FileSource : public FrameSource {
 public:
  FileSource(std::vector<std::string> files, const SourceOptions& o)
      : files_(std::move(files)), names_(output_names(files_)), options_(o) {
    std::string renamed;
    int n = 0;
    for (size_t i = 0; i < files_.size(); ++i) {
      if (names_[i] == fs::path(files_[i]).filename().string()) continue;
      if (++n <= 5) renamed += (n > 1 ? ", " : "") + files_[i] + " as " + names_[i];
    }
    if (n > 5) renamed += " and " + std::to_string(n - 5) + " more";
    if (n > 0) {
      log_info(one_line("--source: " + std::to_string(n) +
                        " file(s) share a name (without extension) with an earlier one; their "
                        "results are saved under their own names: " +
                        renamed));
    }
  }

  int streams() const override { return 0; }
  int interrupted() const override { return g_interrupted.load(); }

  bool next(std::vector<SourceFrame>& out, int max) override {
    const size_t start = out.size();
    if (g_interrupted.load()) return false;
    while (out.size() - start < static_cast<size_t>(max) && index_ < files_.size()) {
      const std::string& path = files_[index_];
      SourceFrame f;
      f.path = path;
      f.name = names_[index_];
      f.index = static_cast<int>(index_);
      f.count = static_cast<int>(files_.size());
      if (!is_video(path)) {
        f.image = read_image(path);  // throws naming the file when unreadable
        out.push_back(std::move(f));
        ++index_;
        continue;
      }
      if (!read_video_frame(f)) {
        ++index_;
        continue;
      }
      out.push_back(std::move(f));
    }
    return out.size() > start;
  }

 private:
  // The next vid_stride-th frame of the video at index_; false when it has no more (the video is
  // then closed, with a warning when it gave no frame at all).
  bool read_video_frame(SourceFrame& f) {
#ifdef YOLO_WITH_OPENCV_VIDEOIO
    if (!cap_.isOpened()) {
      frame_ = 0;
      if (!open_capture(cap_, f.path)) {
        if (files_.size() == 1) throw std::runtime_error(f.path + ": cannot open the video");
        log_warn(one_line(f.path) + ": cannot open the video, skipped");
        return false;
      }
      const double fps = cap_.get(cv::CAP_PROP_FPS);
      fps_ = std::isfinite(fps) && fps > 0 ? fps : 30;
      const double count = cap_.get(cv::CAP_PROP_FRAME_COUNT);
      total_ = std::isfinite(count) && count > 0 ? static_cast<int64_t>(count) : 0;
      frames_ = total_ / options_.vid_stride;
    }
    int64_t grabbed = 0;
    while (grabbed < options_.vid_stride && cap_.grab()) ++grabbed;
    if (grabbed < options_.vid_stride || !cap_.retrieve(f.image) || f.image.empty()) {
      cap_.release();
      // A video shorter than --vid-stride gives no frame: that is the flag's doing, not the
      // file's.
      std::string why = "no frame of the video could be read";
      if (frame_ == 0 && grabbed > 0) {
        why = "it has " + std::to_string(grabbed) + " frame(s), fewer than --vid-stride " +
              std::to_string(options_.vid_stride) + " (every n-th frame is taken, the first " +
              "being frame n); lower --vid-stride";
      }
      if (frame_ == 0 && files_.size() == 1) throw std::runtime_error(f.path + ": " + why);
      if (frame_ == 0) log_warn(one_line(f.path) + ": " + why + ", skipped");
      return false;
    }
    f.kind = SourceFrame::Kind::kVideo;
    f.frame = ++frame_;
    f.frames = frames_;
    f.fps = fps_;
    return true;
#else
    log_warn(one_line(f.path) + " skipped: " + kNoVideoIo);
    return false;
#endif
  }

  InterruptHandler interrupts_;
  std::vector<std::string> files_, names_;
  SourceOptions options_;
  size_t index_ = 0;
  int64_t frame_ = 0, frames_ = 0, total_ = 0;
  double fps_ = 30;
#ifdef YOLO_WITH_OPENCV_VIDEOIO
  cv::VideoCapture cap_;
#endif
};

#ifdef YOLO_WITH_OPENCV_VIDEOIO
// One stream read on its own thread, as LoadStreams' update(): every vid_stride-th frame kept,
// either the newest only or (stream_buffer) all of them, up to 30 waiting.
class StreamReader {
 public:
  StreamReader(const std::string& source, const SourceOptions& o) : source_(source), options_(o) {
    if (!open_capture(cap_, source)) {
      throw UsageError("--source: cannot open the stream '" + source + "'" +
                       (is_webcam_index(source) ? " (no camera with that index)" : ""));
    }
    const double fps = cap_.get(cv::CAP_PROP_FPS);  // may be 0 or NaN: 30 as YOLOv5
    fps_ = std::isfinite(fps) && std::fmod(fps, 100) > 0 ? std::fmod(fps, 100) : 30;
    const double n = cap_.get(cv::CAP_PROP_FRAME_COUNT);
    total_ = std::isfinite(n) && n > 0 ? static_cast<int64_t>(n) : INT64_MAX;
    const int w = static_cast<int>(cap_.get(cv::CAP_PROP_FRAME_WIDTH));
    const int h = static_cast<int>(cap_.get(cv::CAP_PROP_FRAME_HEIGHT));
    log_info(source + ": " + (total_ == INT64_MAX ? std::string("live") : std::to_string(total_)) +
             " frames " + std::to_string(w) + "x" + std::to_string(h) + " at " +
             std::to_string(static_cast<int>(std::lround(fps_))) + " FPS");
    thread_ = std::thread([this] { read_loop(); });
  }

  ~StreamReader() {
    {
      const std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  double fps() const { return fps_; }

  // The next frame, waiting for it; false when the stream ended with none left or on a signal.
  bool take(cv::Mat& out) {
    std::unique_lock<std::mutex> lock(m_);
    while (frames_.empty() && !ended_) {
      if (g_interrupted.load()) return false;
      cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (frames_.empty() || g_interrupted.load()) return false;
    out = std::move(frames_.front());
    frames_.pop_front();
    cv_.notify_all();
    return true;
  }

 private:
  void read_loop() {
    int failures = 0;
    for (int64_t n = 1; n <= total_; ++n) {
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return stop_ || !options_.stream_buffer || frames_.size() < 30; });
        if (stop_) break;
      }
      const bool grabbed = cap_.grab();
      if (grabbed && n % options_.vid_stride != 0) continue;
      cv::Mat im;
      if (grabbed && cap_.retrieve(im) && !im.empty()) {
        failures = 0;
        const std::lock_guard<std::mutex> lock(m_);
        if (!options_.stream_buffer) frames_.clear();
        frames_.push_back(std::move(im));
        cv_.notify_all();
        continue;
      }
      if (total_ != INT64_MAX || ++failures > 3) break;  // a file's end, or a stream gone
      log_warn(source_ + ": the stream is not answering; reopening it");
      cap_.release();
      if (!open_capture(cap_, source_)) break;
    }
    const std::lock_guard<std::mutex> lock(m_);
    ended_ = true;
    cv_.notify_all();
  }

  std::string source_;
  SourceOptions options_;
  cv::VideoCapture cap_;
  double fps_ = 30;
  int64_t total_ = INT64_MAX;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<cv::Mat> frames_;
  bool stop_ = false, ended_ = false;
  std::thread thread_;
};

// Several streams, one frame of each per step (LoadStreams' batch).
class LiveSource : public FrameSource {
 public:
  LiveSource(const std::vector<std::string>& sources, const SourceOptions& o) : sources_(sources) {
    for (const std::string& s : sources) readers_.push_back(std::make_unique<StreamReader>(s, o));
    for (size_t i = 0; i < sources.size(); ++i) {  // streams of one name get their index added
      names_.push_back(stream_name(sources[i]));
      for (size_t j = 0; j < sources.size(); ++j) {
        if (j != i && stream_name(sources[j]) == names_[i]) {
          const fs::path n(names_[i]);
          names_[i] = n.stem().string() + "_" + std::to_string(i) + n.extension().string();
          break;
        }
      }
    }
  }

  ~LiveSource() override { readers_.clear(); }

  int streams() const override { return static_cast<int>(readers_.size()); }

  bool next(std::vector<SourceFrame>& out, int /*max*/) override {
    std::vector<SourceFrame> step(readers_.size());
    for (size_t i = 0; i < readers_.size(); ++i) {
      if (!readers_[i]->take(step[i].image)) {
        if (g_interrupted.load())
          log_info("Interrupted: stopping at step " + std::to_string(step_));
        return false;
      }
      step[i].kind = SourceFrame::Kind::kStream;
      step[i].path = sources_[i];
      step[i].name = names_[i];
      step[i].frame = step_;
      step[i].index = static_cast<int>(i);
      step[i].count = static_cast<int>(readers_.size());
      step[i].fps = readers_[i]->fps();
    }
    ++step_;
    for (SourceFrame& f : step) out.push_back(std::move(f));
    return true;
  }

 private:
  InterruptHandler interrupts_;
  std::vector<std::string> sources_, names_;
  std::vector<std::unique_ptr<StreamReader>> readers_;
  int64_t step_ = 0;
};
#endif

std::vector<std::string> read_streams_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--source: cannot read the streams list '" + path + "'");
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  if (out.empty()) throw UsageError("--source: the streams list '" + path + "' names no stream");
  return out;
}

}  // namespace

bool video_io_available() {
#ifdef YOLO_WITH_OPENCV_VIDEOIO
  return true;
#else
  return false;
#endif
}

bool is_live_source(const std::string& source) {
  return is_webcam_index(source) || is_url(source) ||
         (source.size() > 8 && source.compare(source.size() - 8, 8, ".streams") == 0);
}

std::string stream_name(const std::string& source) {
  std::string s = source;
  for (char& c : s) {
    if (std::string("|@#!$%&()=?^*;:,<>+").find(c) != std::string::npos) c = '_';
  }
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const std::string name = fs::path(s).filename().string();
  return name.empty() || name == "." || name == ".." ? "stream" : name;
}

std::vector<std::string> expand_source(const std::string& source) {
  if (source.empty()) {
    throw UsageError(
        "--source: required (an image, video, folder, glob, .txt list, webcam index "
        "or stream URL)");
  }
  std::error_code ec;
  std::vector<std::string> files, skipped;
  const auto keep = [&](const fs::path& p) {
    if (is_image(p) || is_video(p)) {
      files.push_back(p.string());
    } else if (p.filename().string().rfind('.', 0) != 0) {  // hidden files go unmentioned
      skipped.push_back(p.string());
    }
  };
  std::vector<std::string> unusable;  // entries whose type cannot be read (a symlink loop, ...)
  if (fs::is_directory(source, ec)) {
    for (const auto& e : fs::directory_iterator(source)) {
      std::error_code type_error;
      if (e.is_regular_file(type_error)) {
        keep(e.path());
      } else if (type_error) {
        unusable.push_back(e.path().filename().string() + " (" + type_error.message() + ")");
      }
    }
  } else if (fs::is_regular_file(source, ec) && lower_extension(source) == ".txt") {
    files = list_image_files({source});
  } else if (fs::is_regular_file(source, ec)) {
    files.push_back(source);
  } else if (source.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    if (::glob(source.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) keep(g.gl_pathv[i]);
    }
    ::globfree(&g);
  } else {
    throw UsageError("--source: '" + source + "' does not exist");
  }
  // Images first, then videos, each sorted (LoadImages' order).
  std::stable_sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    const bool va = is_video(a), vb = is_video(b);
    return va != vb ? vb : a < b;
  });
  if (!skipped.empty()) {
    // Named in one line, as many as fit a glance: a photo saved as .heic is not silently left out.
    std::sort(skipped.begin(), skipped.end());
    std::string names;
    for (size_t i = 0; i < std::min<size_t>(skipped.size(), 5); ++i) {
      names += (i ? ", " : "") + fs::path(skipped[i]).filename().string();
    }
    if (skipped.size() > 5) names += " and " + std::to_string(skipped.size() - 5) + " more";
    log_warn(one_line("--source: " + std::to_string(skipped.size()) + " file(s) at '" + source +
                      "' skipped, neither image nor video by their names: " + names +
                      " (images: bmp dng jpeg jpg mpo pfm png tif tiff webp; videos: asf avi "
                      "gif m4v mkv mov mp4 mpeg mpg ts wmv)"));
  }
  if (!unusable.empty()) {
    std::sort(unusable.begin(), unusable.end());
    std::string names;
    for (size_t i = 0; i < std::min<size_t>(unusable.size(), 5); ++i) {
      names += (i ? ", " : "") + unusable[i];
    }
    if (unusable.size() > 5) names += " and " + std::to_string(unusable.size() - 5) + " more";
    log_warn(one_line("--source: " + std::to_string(unusable.size()) + " entr" +
                      (unusable.size() == 1 ? "y" : "ies") + " at '" + source +
                      "' skipped, not readable as files: " + names));
  }
  if (files.empty()) {
    throw UsageError("--source: no images or videos found at '" + source + "'");
  }
  if (!video_io_available()) {
    const auto videos =
        std::count_if(files.begin(), files.end(), [](const std::string& f) { return is_video(f); });
    if (videos == static_cast<long>(files.size())) {
      throw UsageError("--source: '" + source + "' holds only videos, and " + kNoVideoIo);
    }
    if (videos > 0) {
      log_warn("--source: " + std::to_string(videos) + " video(s) at '" + source +
               "' skipped: " + kNoVideoIo);
      files.resize(files.size() - videos);
    }
  }
  return files;
}

std::unique_ptr<FrameSource> open_source(const std::string& source, const SourceOptions& options) {
  if (options.vid_stride < 1) throw UsageError("--vid-stride: must be >= 1");
  if (!is_live_source(source)) return std::make_unique<FileSource>(expand_source(source), options);
  const bool list = source.size() > 8 && source.compare(source.size() - 8, 8, ".streams") == 0;
  const std::vector<std::string> streams =
      list ? read_streams_file(source) : std::vector<std::string>{source};
#ifdef YOLO_WITH_OPENCV_VIDEOIO
  return std::make_unique<LiveSource>(streams, options);
#else
  throw UsageError("--source: '" + streams[0] + "' is a " +
                   (is_webcam_index(streams[0]) ? "webcam index" : "stream") + ", and " +
                   kNoVideoIo);
#endif
}

}  // namespace yolo

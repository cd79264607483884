#pragma once
// What detect reads, frame by frame: images and video files (a file, folder, glob or .txt list of
// images), and live sources (webcam indices, stream URLs, a .streams file listing them), as
// YOLOv5's LoadImages and LoadStreams give them. Videos and streams need OpenCV's videoio module,
// an optional part of the build: without it they are refused (or, inside a folder, skipped) with a
// message saying so.
#include <cstdint>
#include <memory>
#include <opencv2/core/mat.hpp>
#include <string>
#include <vector>

namespace yolo {

struct SourceFrame {
  enum class Kind { kImage, kVideo, kStream };
  Kind kind = Kind::kImage;
  std::string path;          // the image or video file, or the stream as given
  std::string name;          // the file name results are saved under (a stream's: from its URL)
  cv::Mat image;             // BGR, 8-bit
  int64_t frame = 0;         // video: frames taken so far (from 1); stream: the step (from 0)
  int64_t frames = 0;        // video: the frames it will give (its count / vid_stride; 0: unknown)
  int index = 0, count = 1;  // which file or stream of how many
  double fps = 30;           // video and stream: the source's frame rate (for the written video)
};

struct SourceOptions {
  int vid_stride = 1;          // take every n-th frame of videos and streams
  bool stream_buffer = false;  // streams: every frame in order (else the newest at each step)
};

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // Appends the next frames to `out`: up to `max` from files, one per stream from live sources.
  // False (nothing appended) at the end: all files read, a stream ended, or SIGINT/SIGTERM while
  // reading a live source.
  virtual bool next(std::vector<SourceFrame>& out, int max) = 0;
  // Live sources: the number of streams (the frames each step gives); 0 for files.
  virtual int streams() const = 0;
  // Files: the signal (SIGINT, SIGTERM) that ended next() before the last file, else 0. Live
  // sources end on a signal as their normal stop and say 0.
  virtual int interrupted() const { return 0; }
};

// The name each file's results are saved under: its file name, unless an earlier file's would
// share its stem (a.jpg and a.png, or x.jpg in two folders), whose labels, crops or video would
// then overwrite each other: then the extension joins the stem (a_png.png), and a number after
// it when that is taken too (x_jpg_2.jpg).
std::vector<std::string> output_names(const std::vector<std::string>& files);

// Whether this build reads videos and streams (OpenCV's videoio module).
bool video_io_available();
// A webcam index ("0"), a URL (rtsp://, rtmp://, http://, https://, file://, udp://, tcp://) or a
// .streams file: YOLOv5's "webcam" sources.
bool is_live_source(const std::string& source);
// YOLOv5's name for a stream's results: its unsafe characters replaced by '_', then the last path
// component ("rtsp://host/cam1" -> "cam1", "0" -> "0").
std::string stream_name(const std::string& source);
// Image and video files of a file, folder, glob or .txt image list, images first then videos (each
// sorted), as YOLOv5's LoadImages orders them. Throws UsageError naming --source when there are
// none, and saying so when the only ones are videos that this build cannot read.
std::vector<std::string> expand_source(const std::string& source);
// Opens `source` (files or live). Throws UsageError naming --source when nothing is there or a
// stream cannot be opened.
std::unique_ptr<FrameSource> open_source(const std::string& source, const SourceOptions& options);

}  // namespace yolo

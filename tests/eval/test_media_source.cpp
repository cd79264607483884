// detect's sources: which --source values are files and which are live, the order files are read
// in, and video frames as YOLOv5's loaders give them (--vid-stride, frame numbers, streams).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>

#include "utils/core/errors.h"
#include "utils/eval/media_source.h"

#ifdef YOLO_WITH_OPENCV_VIDEOIO
#include <opencv2/videoio.hpp>
#endif

namespace fs = std::filesystem;
using namespace yolo;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void touch_image(const fs::path& p) {
  ASSERT_TRUE(cv::imwrite(p.string(), cv::Mat(8, 8, CV_8UC3, cv::Scalar(1, 2, 3))));
}

std::string usage_error(const std::string& source) {
  try {
    open_source(source, {});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

#ifdef YOLO_WITH_OPENCV_VIDEOIO
// A lossless video whose frame k is filled with the value 20 * k.
fs::path write_video(const fs::path& dir, int frames, double fps) {
  const fs::path p = dir / "clip.avi";
  cv::VideoWriter w(p.string(), cv::VideoWriter::fourcc('p', 'n', 'g', ' '), fps, {32, 24});
  EXPECT_TRUE(w.isOpened());
  for (int k = 0; k < frames; ++k) w.write(cv::Mat(24, 32, CV_8UC3, cv::Scalar::all(20 * k)));
  w.release();
  return p;
}
#endif

}  // namespace

TEST(MediaSource, LiveSourcesAreWebcamIndicesUrlsAndStreamsLists) {
  for (const char* s : {"0", "12", "rtsp://cam.local/live", "HTTP://x/y", "rtmp://a/b",
                        "file:///tmp/v.mp4", "cams.streams"}) {
    EXPECT_TRUE(is_live_source(s)) << s;
  }
  for (const char* s : {"img.jpg", "videos/", "clip.mp4", "10000", "-1", "list.txt", ""}) {
    EXPECT_FALSE(is_live_source(s)) << s;
  }
}

TEST(MediaSource, StreamNamesAreYoloV5s) {
  EXPECT_EQ(stream_name("0"), "0");
  EXPECT_EQ(stream_name("rtsp://example.com/media.mp4"), "media.mp4");
  EXPECT_EQ(stream_name("rtsp://user:pw@host:554"), "user_pw_host_554");
  EXPECT_EQ(stream_name("http://host/live/"), "live");
}

TEST(MediaSource, FilesAreImagesFirstThenVideosEachSorted) {
  const fs::path d = temp_dir("media_order");
  touch_image(d / "b.jpg");
  touch_image(d / "a.png");
  std::ofstream(d / "z.mp4") << "x";
  std::ofstream(d / "c.avi") << "x";
  std::ofstream(d / "notes.md") << "x";
  const std::vector<std::string> files = expand_source(d.string());
  std::vector<std::string> want = {(d / "a.png").string(), (d / "b.jpg").string()};
  if (video_io_available())
    want.insert(want.end(), {(d / "c.avi").string(), (d / "z.mp4").string()});
  EXPECT_EQ(files, want);
  fs::remove_all(d);
}

TEST(MediaSource, MissingAndEmptySourcesNameTheFlag) {
  const fs::path d = temp_dir("media_missing");
  EXPECT_NE(usage_error((d / "nope.jpg").string()).find("--source: '"), std::string::npos);
  EXPECT_NE(usage_error((d / "nope.jpg").string()).find("does not exist"), std::string::npos);
  EXPECT_NE(usage_error(d.string()).find("no images or videos found"), std::string::npos);
  EXPECT_NE(usage_error("").find("--source: required"), std::string::npos);
  fs::remove_all(d);
}

TEST(MediaSource, WithoutVideoSupportVideosAndStreamsAreRefusedSayingWhy) {
  if (video_io_available()) GTEST_SKIP() << "this build reads videos (OpenCV videoio)";
  const fs::path d = temp_dir("media_novideo");
  std::ofstream(d / "clip.mp4") << "x";
  EXPECT_NE(usage_error((d / "clip.mp4").string()).find("videoio"), std::string::npos);
  EXPECT_NE(usage_error("rtsp://cam/live").find("videoio"), std::string::npos);
  EXPECT_NE(usage_error("0").find("webcam index"), std::string::npos);
  fs::remove_all(d);
}

#ifdef YOLO_WITH_OPENCV_VIDEOIO
TEST(MediaSource, VideoFramesFollowVidStrideAndYoloV5sNumbering) {
  const fs::path d = temp_dir("media_video");
  write_video(d, 7, 5);
  touch_image(d / "a.jpg");
  SourceOptions o;
  o.vid_stride = 2;
  auto src = open_source(d.string(), o);
  EXPECT_EQ(src->streams(), 0);
  std::vector<SourceFrame> got;
  ASSERT_TRUE(src->next(got, 2));  // the image, then the video's first taken frame
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].kind, SourceFrame::Kind::kImage);
  EXPECT_EQ(got[1].kind, SourceFrame::Kind::kVideo);
  while (src->next(got, 2)) {
  }
  ASSERT_EQ(got.size(), 4u);  // 7 frames, every second one: source frames 1, 3, 5
  for (int k = 0; k < 3; ++k) {
    const SourceFrame& f = got[1 + k];
    EXPECT_EQ(f.frame, k + 1);
    EXPECT_EQ(f.frames, 3);
    EXPECT_EQ(f.index, 1);
    EXPECT_EQ(f.count, 2);
    EXPECT_DOUBLE_EQ(f.fps, 5);
    EXPECT_EQ(f.name, "clip.avi");
    EXPECT_EQ(f.image.at<cv::Vec3b>(3, 3)[0], 20 * (2 * k + 1));
  }
  fs::remove_all(d);
}

TEST(MediaSource, BufferedStreamGivesEveryFrameInOrderThenEnds) {
  const fs::path d = temp_dir("media_stream");
  const fs::path clip = write_video(d, 6, 4);
  SourceOptions o;
  o.stream_buffer = true;
  auto src = open_source("file://" + clip.string(), o);
  EXPECT_EQ(src->streams(), 1);
  std::vector<SourceFrame> got;
  while (src->next(got, 1)) {
  }
  ASSERT_EQ(got.size(), 6u);
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(got[k].kind, SourceFrame::Kind::kStream);
    EXPECT_EQ(got[k].frame, k);  // stream steps count from 0, as YOLOv5's
    EXPECT_EQ(got[k].name, "clip.avi");
    EXPECT_DOUBLE_EQ(got[k].fps, 4);
    EXPECT_EQ(got[k].image.at<cv::Vec3b>(3, 3)[0], 20 * k);
  }
  fs::remove_all(d);
}

TEST(MediaSource, StreamThatCannotOpenIsAUsageErrorNamingIt) {
  const std::string msg = usage_error("file:///nonexistent/dir/x.avi");
  EXPECT_NE(msg.find("cannot open the stream 'file:///nonexistent/dir/x.avi'"), std::string::npos)
      << msg;
}
#endif

// read_image's JPEG path (libjpeg-turbo decoding straight to BGR) against cv::imread: the same
// pixels for plain JPEGs, and OpenCV's own result wherever the fast path steps aside.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>

#include "data/image_io.h"
#include "test_helpers.h"
#include "utils/core/paths.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::TempDir;

namespace {

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// Noise over gradients: every DCT block and chroma sample matters.
cv::Mat test_image(int w, int h, unsigned seed) {
  cv::Mat im(h, w, CV_8UC3);
  std::mt19937 rng(seed);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      im.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<uchar>((x * 255) / w + rng() % 40),
                    static_cast<uchar>((y * 255) / h), static_cast<uchar>(rng()));
    }
  }
  return im;
}

bool same(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

// A JPEG with an APP1 Exif segment holding only the orientation tag, spliced after its SOI.
std::vector<unsigned char> with_exif_orientation(std::vector<unsigned char> jpeg, int orientation) {
  std::vector<unsigned char> tiff = {'I',
                                     'I',
                                     42,
                                     0,
                                     8,
                                     0,
                                     0,
                                     0,  // little endian, IFD at 8
                                     1,
                                     0,  // one entry
                                     0x12,
                                     0x01,
                                     3,
                                     0,
                                     1,
                                     0,
                                     0,
                                     0,  // orientation, SHORT, 1
                                     static_cast<unsigned char>(orientation),
                                     0,
                                     0,
                                     0,
                                     0,
                                     0,
                                     0,
                                     0};  // no next IFD
  std::vector<unsigned char> app1 = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  app1.insert(app1.end(), tiff.begin(), tiff.end());
  const size_t len = app1.size() - 2;
  app1[2] = static_cast<unsigned char>(len >> 8), app1[3] = static_cast<unsigned char>(len);
  jpeg.insert(jpeg.begin() + 2, app1.begin(), app1.end());
  return jpeg;
}

}  // namespace

TEST(ImageIo, JpegsDecodeToImreadsPixels) {
  if (!jpeg_fast_path()) GTEST_SKIP() << "built without libjpeg-turbo: OpenCV decodes every JPEG";
  TempDir d;
  int k = 0;
  for (const cv::Size size : {cv::Size(640, 480), cv::Size(97, 61), cv::Size(33, 200)}) {
    for (const int quality : {95, 60}) {
      for (const int progressive : {0, 1}) {
        const std::string path = d / ("im" + std::to_string(k++) + ".jpg");
        cv::imwrite(path, test_image(size.width, size.height, k),
                    {cv::IMWRITE_JPEG_QUALITY, quality, cv::IMWRITE_JPEG_PROGRESSIVE, progressive,
                     cv::IMWRITE_JPEG_OPTIMIZE, progressive});
        SCOPED_TRACE(path);
        const cv::Mat fast = decode_jpeg(file_bytes(path));
        ASSERT_FALSE(fast.empty()) << "a plain JPEG must take the fast path";
        const cv::Mat want = cv::imread(path, cv::IMREAD_COLOR);
        EXPECT_TRUE(same(fast, want));
        EXPECT_TRUE(same(read_image(path), want));
      }
    }
  }
}

TEST(ImageIo, Coco128DecodesToImreadsPixels) {
  const fs::path dir =
      fs::path(yolo::project_root()) / "../shared/datasets/coco128/images/train2017";
  if (!jpeg_fast_path() || !fs::is_directory(dir)) {
    GTEST_SKIP() << "needs libjpeg-turbo and " << dir.string();
  }
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string path = e.path().string();
    const cv::Mat want = cv::imread(path, cv::IMREAD_COLOR);
    EXPECT_TRUE(same(read_image(path), want)) << path;
    ++n;
  }
  EXPECT_EQ(n, 128);
}

TEST(ImageIo, OpenCvDecodesWhatTheFastPathLeaves) {
  TempDir d;
  const cv::Mat im = test_image(80, 48, 7);
  const std::string plain = d / "plain.jpg";
  cv::imwrite(plain, im);
  // EXIF orientation 6 (rotate 90 clockwise), which imread applies.
  const std::string rotated = d / "rotated.jpg";
  write_bytes(rotated, with_exif_orientation(file_bytes(plain), 6));
  EXPECT_TRUE(decode_jpeg(file_bytes(rotated)).empty());
  const cv::Mat r = read_image(rotated);
  EXPECT_EQ(r.size(), cv::Size(48, 80));
  EXPECT_TRUE(same(r, cv::imread(rotated, cv::IMREAD_COLOR)));
  // Orientation 1 is the stored layout: the fast path keeps it.
  const std::string upright = d / "upright.jpg";
  write_bytes(upright, with_exif_orientation(file_bytes(plain), 1));
  EXPECT_EQ(decode_jpeg(file_bytes(upright)).empty(), !jpeg_fast_path());
  EXPECT_TRUE(same(read_image(upright), cv::imread(plain, cv::IMREAD_COLOR)));
  // Greyscale, truncated, a PNG named .jpg and garbage.
  const std::string grey = d / "grey.jpg";
  cv::Mat g;
  cv::cvtColor(im, g, cv::COLOR_BGR2GRAY);
  cv::imwrite(grey, g);
  EXPECT_TRUE(decode_jpeg(file_bytes(grey)).empty());
  EXPECT_TRUE(same(read_image(grey), cv::imread(grey, cv::IMREAD_COLOR)));
  std::vector<unsigned char> cut = file_bytes(plain);
  cut.resize(cut.size() / 2);
  const std::string truncated = d / "truncated.jpg";
  write_bytes(truncated, cut);
  EXPECT_TRUE(decode_jpeg(cut).empty());
  EXPECT_TRUE(same(read_image(truncated), cv::imread(truncated, cv::IMREAD_COLOR)));
  const std::string png = d / "png.jpg";
  cv::imwrite(d / "a.png", im);
  fs::rename(d / "a.png", png);
  EXPECT_TRUE(same(read_image(png), im));
  EXPECT_TRUE(decode_jpeg({0xFF, 0xD8, 0xFF, 0x00, 0x13}).empty());
  write_bytes(d / "junk.jpg", {0xFF, 0xD8, 0xFF, 0x00, 0x13});
  EXPECT_THROW(read_image(d / "junk.jpg"), std::runtime_error);
}

// Sizes come from the header alone, for each format it reads, the JPEG's after a metadata segment.
TEST(ImageIo, HeaderGivesTheSize) {
  TempDir d;
  const cv::Mat im(23, 37, CV_8UC3, cv::Scalar(10, 20, 30));
  for (const char* ext : {".png", ".jpg", ".bmp", ".webp"}) {
    SCOPED_TRACE(ext);
    const std::string p = d / (std::string("a") + ext);
    if (!cv::imwrite(p, im)) continue;  // a codec this OpenCV lacks
    int64_t w = 0, h = 0;
    ASSERT_TRUE(image_size_from_header(p, w, h));
    EXPECT_EQ(w, 37);
    EXPECT_EQ(h, 23);
  }
  // EXIF-like APP1 segment first, then the frame header.
  std::vector<unsigned char> jpg = file_bytes(d / "a.jpg");
  const std::vector<unsigned char> app1 = {0xFF, 0xE1, 0x00, 0x06, 'E', 'x', 'i', 'f'};
  jpg.insert(jpg.begin() + 2, app1.begin(), app1.end());
  write_bytes(d / "exif.jpg", jpg);
  int64_t w = 0, h = 0;
  ASSERT_TRUE(image_size_from_header(d / "exif.jpg", w, h));
  EXPECT_EQ(w * 1000 + h, 37023);
}

// A header claiming 20000x20000 is refused before anything is decoded, naming the file, its
// size and the limit; YOLO_MAX_IMAGE_PIXELS raises the limit.
TEST(ImageIo, PixelLimitRefusesBombs) {
  TempDir d;
  std::vector<unsigned char> png = {0x89, 'P',  'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0, 0,
                                    13,   'I',  'H', 'D', 'R',  0,    0,    0x4e, 0x20, 0, 0,
                                    0x4e, 0x20, 8,   2,   0,    0,    0,    0,    0,    0, 0};
  write_bytes(d / "bomb.png", png);
  std::vector<unsigned char> jpg = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8, 0x4e, 0x20, 0x4e, 0x20};
  jpg.resize(64, 0);
  write_bytes(d / "bomb.jpg", jpg);
  for (const char* name : {"bomb.png", "bomb.jpg"}) {
    SCOPED_TRACE(name);
    const std::string p = d / name;
    try {
      read_image(p);
      ADD_FAILURE() << "decoded";
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(p + ": 20000x20000 = 400000000 pixels, over the limit of 178956970"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("YOLO_MAX_IMAGE_PIXELS"), std::string::npos) << m;
    }
  }
  ::setenv("YOLO_MAX_IMAGE_PIXELS", "500000000", 1);
  EXPECT_EQ(max_image_pixels(), 500000000);
  try {
    read_image(d / "bomb.png");  // past the limit now, and not a real image
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
  }
  ::setenv("YOLO_MAX_IMAGE_PIXELS", "lots", 1);
  EXPECT_THROW(max_image_pixels(), std::runtime_error);
  ::unsetenv("YOLO_MAX_IMAGE_PIXELS");
}

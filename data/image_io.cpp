#include "data/image_io.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <stdexcept>
#include <vector>

#ifdef YOLO_WITH_LIBJPEG
#include <jpeglib.h>

#include <csetjmp>
#endif

namespace yolo {
namespace {

bool has_jpeg_suffix(const std::string& path) {
  const auto dot = path.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = path.substr(dot + 1);
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == "jpg" || ext == "jpeg";
}

#if defined(YOLO_WITH_LIBJPEG) && defined(JCS_EXTENSIONS)
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  bool warned = false;
};

void jpeg_fail(j_common_ptr c) { std::longjmp(reinterpret_cast<JpegErrors*>(c->err)->jump, 1); }

void jpeg_note(j_common_ptr c, int level) {
  if (level < 0) reinterpret_cast<JpegErrors*>(c->err)->warned = true;  // corrupt data
}

// The EXIF orientation tag of the file's APP1 "Exif" segment: 1 (as stored) when there is none,
// 0 when it cannot be read with certainty (two segments, a malformed one).
int exif_orientation(jpeg_saved_marker_ptr markers) {
  int found = 1, segments = 0;
  for (auto m = markers; m; m = m->next) {
    if (m->marker != JPEG_APP0 + 1 || m->data_length < 6 ||
        std::memcmp(m->data, "Exif\0\0", 6) != 0) {
      continue;
    }
    if (++segments > 1) return 0;
    const unsigned char* t = m->data + 6;
    const size_t n = m->data_length - 6;
    if (n < 8) return 0;
    const bool le = t[0] == 'I' && t[1] == 'I';
    if (!le && !(t[0] == 'M' && t[1] == 'M')) return 0;
    auto u16 = [&](size_t o) { return le ? t[o] | t[o + 1] << 8 : t[o] << 8 | t[o + 1]; };
    auto u32 = [&](size_t o) {
      return le ? static_cast<size_t>(u16(o)) | static_cast<size_t>(u16(o + 2)) << 16
                : static_cast<size_t>(u16(o)) << 16 | static_cast<size_t>(u16(o + 2));
    };
    const size_t ifd = u32(4);
    if (ifd + 2 > n) return 0;
    const unsigned entries = u16(ifd);
    for (unsigned i = 0; i < entries; ++i) {
      const size_t e = ifd + 2 + 12 * static_cast<size_t>(i);
      if (e + 12 > n) return 0;
      if (u16(e) == 0x0112) found = u16(e + 8);
    }
  }
  return found;
}

// A 3-channel YCbCr JPEG decoded by libjpeg-turbo straight into BGR: the pixels OpenCV's
// imread gives (same library, same settings), without the separate RGB -> BGR pass of its 4.6
// decoder, which made decoding 1.7x slower. false leaves the file to OpenCV: another colour
// space, an EXIF rotation, or any error or warning (truncated or corrupt data).
bool decode_jpeg_bgr(const std::vector<unsigned char>& bytes, cv::Mat& out) {
  jpeg_decompress_struct c;
  JpegErrors err;
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.emit_message = jpeg_note;
  // No object with a destructor is made between here and the last libjpeg call: longjmp skips
  // destructors. `out` belongs to the caller.
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&c);
    return false;
  }
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&c, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&c, TRUE);
  if (c.num_components != 3 || c.jpeg_color_space != JCS_YCbCr ||
      exif_orientation(c.marker_list) != 1) {
    jpeg_destroy_decompress(&c);
    return false;
  }
  c.out_color_space = JCS_EXT_BGR;
  jpeg_start_decompress(&c);
  out.create(static_cast<int>(c.output_height), static_cast<int>(c.output_width), CV_8UC3);
  while (c.output_scanline < c.output_height) {
    JSAMPROW row = out.ptr(static_cast<int>(c.output_scanline));
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
  return !err.warned;
}
#endif

}  // namespace

bool jpeg_fast_path() {
#if defined(YOLO_WITH_LIBJPEG) && defined(JCS_EXTENSIONS)
  return true;
#else
  return false;
#endif
}

cv::Mat decode_jpeg(const std::vector<unsigned char>& bytes) {
  cv::Mat im;
#if defined(YOLO_WITH_LIBJPEG) && defined(JCS_EXTENSIONS)
  const bool jpeg = bytes.size() > 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
  if (jpeg && !decode_jpeg_bgr(bytes, im)) im.release();
#endif
  return im;
}

namespace {

uint32_t be16(const unsigned char* b) { return (uint32_t(b[0]) << 8) | b[1]; }
uint32_t be32(const unsigned char* b) { return (be16(b) << 16) | be16(b + 2); }
uint32_t le16(const unsigned char* b) { return (uint32_t(b[1]) << 8) | b[0]; }
uint32_t le24(const unsigned char* b) { return (uint32_t(b[2]) << 16) | le16(b); }
uint32_t le32(const unsigned char* b) { return (le16(b + 2) << 16) | le16(b); }

// A JPEG's size from its first frame header (SOF0..15 but DHT, JPG and DAC), walking the marker
// segments from `in`'s start.
bool jpeg_size(std::ifstream& in, int64_t& w, int64_t& h) {
  unsigned char m[9];
  in.seekg(2);
  for (int segments = 0; segments < 10000 && in.read(reinterpret_cast<char*>(m), 4); ++segments) {
    if (m[0] != 0xFF) return false;
    const int marker = m[1];
    const uint32_t len = be16(m + 2);
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      if (!in.read(reinterpret_cast<char*>(m), 5)) return false;
      h = be16(m + 1);
      w = be16(m + 3);
      return true;
    }
    if (len < 2) return false;
    in.seekg(len - 2, std::ios::cur);
  }
  return false;
}

}  // namespace

int64_t max_image_pixels() {
  constexpr int64_t kPilBombLimit = 2 * int64_t(89478485);
  const char* env = std::getenv("YOLO_MAX_IMAGE_PIXELS");
  if (!env || !*env) return kPilBombLimit;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v <= 0) {
    throw std::runtime_error("YOLO_MAX_IMAGE_PIXELS='" + std::string(env) +
                             "': expected a positive number of pixels");
  }
  return v;
}

bool image_size_from_header(const std::string& path, int64_t& w, int64_t& h) {
  std::ifstream in(path, std::ios::binary);
  unsigned char b[32] = {};
  in.read(reinterpret_cast<char*>(b), sizeof(b));
  const auto n = in.gcount();
  in.clear();
  if (n >= 24 && std::memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 &&
      std::memcmp(b + 12, "IHDR", 4) == 0) {
    w = be32(b + 16);
    h = be32(b + 20);
    return true;
  }
  if (n >= 26 && b[0] == 'B' && b[1] == 'M') {
    w = static_cast<int32_t>(le32(b + 18));
    h = static_cast<int32_t>(le32(b + 22));
    h = h < 0 ? -h : h;  // top-down bitmaps store a negative height
    return true;
  }
  if (n >= 10 && std::memcmp(b, "GIF8", 4) == 0) {
    w = le16(b + 6);
    h = le16(b + 8);
    return true;
  }
  if (n >= 30 && std::memcmp(b, "RIFF", 4) == 0 && std::memcmp(b + 8, "WEBP", 4) == 0) {
    if (std::memcmp(b + 12, "VP8X", 4) == 0) {
      w = int64_t(le24(b + 24)) + 1;
      h = int64_t(le24(b + 27)) + 1;
      return true;
    }
    if (std::memcmp(b + 12, "VP8L", 4) == 0) {
      const uint32_t bits = le32(b + 21);
      w = int64_t(bits & 0x3FFF) + 1;
      h = int64_t((bits >> 14) & 0x3FFF) + 1;
      return true;
    }
    if (std::memcmp(b + 12, "VP8 ", 4) == 0) {
      w = le16(b + 26) & 0x3FFF;
      h = le16(b + 28) & 0x3FFF;
      return true;
    }
    return false;
  }
  if (n >= 4 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return jpeg_size(in, w, h);
  return false;
}

cv::Mat read_image(const std::string& path) {
  int64_t w = 0, h = 0;
  if (image_size_from_header(path, w, h) && w * h > max_image_pixels()) {
    throw std::runtime_error(path + ": " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                             std::to_string(w * h) + " pixels, over the limit of " +
                             std::to_string(max_image_pixels()) +
                             " (a decompression bomb?); not decoded. Set YOLO_MAX_IMAGE_PIXELS "
                             "to a higher number of pixels if such images are intended");
  }
  if (jpeg_fast_path() && has_jpeg_suffix(path)) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    std::vector<unsigned char> bytes(in ? static_cast<size_t>(in.tellg()) : 0);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!in) bytes.clear();  // unreadable: imread below names the file
    cv::Mat fast = decode_jpeg(bytes);
    if (!fast.empty()) return fast;
  }
  cv::Mat im = cv::imread(path, cv::IMREAD_COLOR);
  if (im.empty()) {
    throw std::runtime_error(path +
                             ": cannot read or decode it as an image (missing, unreadable, not an "
                             "image, or a format OpenCV does not read)");
  }
  return im;
}

}  // namespace yolo

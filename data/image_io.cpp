#include "data/image_io.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <stdexcept>

#include "utils/core/fs_atomic.h"

namespace yolo {

cv::Mat read_image(const std::string& path) {
  cv::Mat im = cv::imread(path, cv::IMREAD_COLOR);
  if (im.empty()) {
    throw std::runtime_error(path +
                             ": image not found or not decodable; delete the label cache "
                             "if the file was changed or removed");
  }
  return im;
}

std::string npy_path_for(const std::string& image_path) {
  const auto dot = image_path.rfind('.');
  const auto slash = image_path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return image_path + ".npy";
  }
  return image_path.substr(0, dot) + ".npy";
}

void save_npy(const std::string& path, const cv::Mat& image) {
  if (image.type() != CV_8UC3)
    throw std::runtime_error(path + ": only 8-bit BGR images are cached");
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" +
                       std::to_string(image.rows) + ", " + std::to_string(image.cols) + ", 3), }";
  // NPY v1.0: magic, version, u16 header length; header padded with spaces so data is 64-aligned.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  const uint16_t len = static_cast<uint16_t>(header.size());
  bytes += static_cast<char>(len & 0xFF);
  bytes += static_cast<char>(len >> 8);
  bytes += header;
  const size_t row = static_cast<size_t>(image.cols) * 3;
  for (int y = 0; y < image.rows; ++y) bytes.append(image.ptr<char>(y), row);
  write_file_atomic(path, bytes);
}

cv::Mat load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read the cached image");
  char pre[10];
  in.read(pre, 10);
  if (!in || std::memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] != 1) {
    throw std::runtime_error(path + ": not a .npy v1 file; delete it to rebuild the disk cache");
  }
  const size_t len = static_cast<unsigned char>(pre[8]) | (static_cast<unsigned char>(pre[9]) << 8);
  std::string header(len, '\0');
  in.read(header.data(), len);
  // The header is a Python dict literal; only the shape tuple "(h, w, 3)" varies.
  int h = 0, w = 0, c = 0;
  const auto shape = header.find("'shape': (");
  if (!in || header.find("'|u1'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos || shape == std::string::npos ||
      std::sscanf(header.c_str() + shape + 10, "%d, %d, %d)", &h, &w, &c) != 3 || c != 3 ||
      h <= 0 || w <= 0) {
    throw std::runtime_error(path +
                             ": unexpected .npy header; delete it to rebuild the disk cache");
  }
  cv::Mat im(h, w, CV_8UC3);
  in.read(reinterpret_cast<char*>(im.data), static_cast<std::streamsize>(im.total() * 3));
  if (!in) throw std::runtime_error(path + ": truncated .npy; delete it to rebuild the disk cache");
  return im;
}

}  // namespace yolo

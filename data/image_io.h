#pragma once
// Image reading and the --cache disk format: decoded images stored as NumPy .npy files
// (uint8, shape (h, w, 3), BGR) next to the images, as YOLOv5 does.
#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace yolo {

// Reads an image as 8-bit BGR (EXIF orientation applied); throws std::runtime_error naming it.
// The pixels are cv::imread's; JPEGs are decoded by libjpeg-turbo directly where decode_jpeg can.
cv::Mat read_image(const std::string& path);

// true when this build decodes JPEGs itself (libjpeg-turbo found at configure time).
bool jpeg_fast_path();

// A plain JPEG's bytes decoded to 8-bit BGR as cv::imread would; an empty Mat when it is left to
// OpenCV (not a JPEG, not 3-channel YCbCr, an EXIF rotation, corrupt or truncated data, or no
// fast path in this build).
cv::Mat decode_jpeg(const std::vector<unsigned char>& bytes);

// image.jpg -> image.npy
std::string npy_path_for(const std::string& image_path);

// Writes a CV_8UC3 image as .npy atomically; throws naming the path on failure.
void save_npy(const std::string& path, const cv::Mat& image);

// Reads a .npy written by save_npy (uint8, 3 channels); throws naming the path when malformed.
cv::Mat load_npy(const std::string& path);

}  // namespace yolo

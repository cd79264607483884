#pragma once
// Image reading and the --cache disk format: decoded images stored as NumPy .npy files
// (uint8, shape (h, w, 3), BGR) next to the images, as YOLOv5 does.
#include <cstdint>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace yolo {

// Reads an image as 8-bit BGR (EXIF orientation applied); throws std::runtime_error naming it.
// The pixels are cv::imread's; JPEGs are decoded by libjpeg-turbo directly where decode_jpeg can.
// An image whose header claims more than max_image_pixels() is refused before decoding.
cv::Mat read_image(const std::string& path);

// The most pixels an image may have: PIL's decompression-bomb limit (2 x 89,478,485), which
// YOLOv5's image checks apply, unless the environment variable YOLO_MAX_IMAGE_PIXELS sets
// another (a positive integer).
int64_t max_image_pixels();

// Width and height from a JPEG, PNG, BMP, GIF or WebP header in the file's first bytes (a JPEG's
// frame header may follow its metadata segments: `path` is read further for it). false for other
// formats or headers too short to tell.
bool image_size_from_header(const std::string& path, int64_t& width, int64_t& height);

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

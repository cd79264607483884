#pragma once
// Image reading: 8-bit BGR as cv::imread gives it, JPEGs through libjpeg-turbo where it can.
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

}  // namespace yolo

#pragma once
// One image + label file check, as YOLOv5 v7.0's verify_image_label.
#include <string>

#include "data/labels.h"

namespace yolo {

struct VerifiedImage {
  std::string image;  // image path
  int height = 0;     // original size, after EXIF orientation
  int width = 0;
  Labels labels;         // checked rows (duplicates removed)
  bool corrupt = false;  // skip this image
  bool label_missing = false;
  bool label_empty = false;
  std::string message;  // warning to print (corrupt reason, duplicates removed)
};

// Decodes the image and parses its label file. Flags as corrupt: unreadable or undecodable
// images, JPEGs without the FFD9 end marker (truncated), images under 10 px, label rows that are
// not 5 numeric columns (polygon rows are turned into their bounding box), NaN/inf, negative
// values, coordinates > 1, non-integer class ids or ids >= nc. Duplicate rows are dropped with a
// message. Never throws.
VerifiedImage verify_image_label(const std::string& image_path, const std::string& label_path,
                                 int nc);

}  // namespace yolo

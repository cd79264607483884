#pragma once
// The built-in synthetic dataset (configs/data/shapes.yaml): filled circles, rectangles and
// triangles on varied backgrounds, with exact boxes, so training works without downloads.
#include <cstdint>
#include <string>
#include <vector>

namespace yolo {

struct ShapesSpec {
  int train = 300;  // images per split
  int val = 100;
  int width = 256;  // heights vary between 160 and 256 so rect batching is exercised
  uint64_t seed = 0x5eed;
};

// Class names in id order: circle, rectangle, triangle.
std::vector<std::string> shapes_class_names();

// Generates root/images/{train,val}/*.png and root/labels/{train,val}/*.txt unless root exists.
// Deterministic for a spec. Safe when processes race: each builds in a private temporary folder
// that is renamed to `root`; the loser discards its copy.
void ensure_shapes_dataset(const std::string& root, const ShapesSpec& spec = {});

}  // namespace yolo

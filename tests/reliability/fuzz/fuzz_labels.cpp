// libFuzzer target: the YOLO label-file parser (verify_image_label) and the label cache decoder.
// A label file is either rejected with a message naming it or yields labels that are all in
// range; a cache blob either decodes or is rejected, never crashes or allocates without bound.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <opencv2/imgcodecs.hpp>

#include "data/label_cache.h"
#include "data/verify.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace yolo;
  static const std::string image = [] {
    const std::string p = fuzz::temp_dir() + "/im.png";
    cv::imwrite(p, cv::Mat(16, 16, CV_8UC3, cv::Scalar(1, 2, 3)));
    return p;
  }();
  constexpr int nc = 3;
  const std::string label = fuzz::write_input("im.txt", data, size);
  const VerifiedImage r = verify_image_label(image, label, nc);
  if (r.corrupt) {
    if (r.message.find(label) == std::string::npos) {
      std::fprintf(stderr, "rejection does not name the label file: %s\n", r.message.c_str());
      std::abort();
    }
  } else {
    for (const Label& l : r.labels) {
      for (float v : {l.cx, l.cy, l.w, l.h}) {
        if (!(v >= 0 && v <= 1)) std::abort();
      }
      if (!(l.cls >= 0 && l.cls < nc && l.cls == std::floor(l.cls))) std::abort();
    }
  }
  // The same bytes as a label cache, checked against the hash they carry (offset 12).
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  uint64_t hash = 0;
  if (size >= 20) std::memcpy(&hash, data + 12, 8);
  LabelScan scan;
  decode_label_cache(bytes, hash, scan);
  return 0;
}

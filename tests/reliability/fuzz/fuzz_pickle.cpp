// libFuzzer target: the restricted unpickler with YOLOv5's allow-list, and the reading of a
// YOLOv5 checkpoint from what it returns. Each input is accepted or refused with an exception
// naming its source; storages are zeros of the claimed size (bounded), so tensor views are checked
// against real extents.
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "models/unpickler.h"
#include "models/yolov5_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace yolo;
  const std::string source = fuzz::temp_dir() + "/in.pkl";
  const std::string pickle(reinterpret_cast<const char*>(data), size);
  fuzz::accepted_or_named(source, [&] {
    const PyRef root = unpickle_bytes(pickle, source, is_yolov5_checkpoint_global);
    yolov5_checkpoint(*root, source);
  });
  return 0;
}

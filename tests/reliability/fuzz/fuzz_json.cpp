// libFuzzer target: COCO JSON (annotations as val reads instances_val2017.json, and results as
// val --save-json writes them). Each input is either read or refused with an exception naming the
// file; what simdjson's on-demand parser skips is still checked, so malformed text anywhere must
// be refused, never crash or read out of bounds.
#include <cstdint>

#include "fuzz_common.h"
#include "utils/eval/coco_eval.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace yolo;
  const std::string path = fuzz::write_input("in.json", data, size);
  fuzz::accepted_or_named(path, [&] {
    const CocoGroundTruth gt = load_coco_ground_truth(path);
    // Evaluating what was read exercises the ids and boxes it produced.
    if (gt.annotations.size() < 64) coco_evaluate(gt, {});
  });
  fuzz::accepted_or_named(path, [&] { load_coco_results(path); });
  return 0;
}

// libFuzzer target: the YAML loaders (dataset, model, hyperparameters, opt.yaml). Each input is
// either accepted or refused with an exception naming the file; a model YAML that parses is also
// built when its sizes are small, so layer argument checks are fuzzed too.
#include <cstdint>

#include "data/dataset_config.h"
#include "fuzz_common.h"
#include "models/model_config.h"
#include "models/yolo.h"
#include "utils/engine/hyp.h"
#include "utils/engine/train_options.h"

namespace {

// Builds only models whose layers are small, so a fuzzed "[-1, 1, Conv, [99999999]]" is not an
// out-of-memory finding.
bool small_enough(const yolo::ModelSpec& s) {
  if (s.layers.size() > 40 || s.nc > 100 || s.width_multiple > 2 || s.depth_multiple > 2) {
    return false;
  }
  for (const auto& L : s.layers) {
    if (L.number > 4) return false;
    for (const auto& a : L.args) {
      if (a.size() > 4) return false;  // at most 4 characters: 9999
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace yolo;
  const std::string path = fuzz::write_input("in.yaml", data, size);
  fuzz::accepted_or_named(path, [&] { load_dataset_config(path); });
  fuzz::accepted_or_named(path, [&] { load_hyp(path); });
  fuzz::accepted_or_named(path, [&] { load_options(path); });
  fuzz::accepted_or_named(path, [&] {
    ModelSpec spec = parse_model_spec_file(path);
    if (small_enough(spec)) DetectionModel m(std::move(spec));
  });
  return 0;
}

// What tests/interop/test_yolov5_models.py compares with YOLOv5's own models:
//   model_probe summary CFG           the parameter count, then each state_dict entry and shape
//   model_probe forward W IN OUT [fused|augment]  loads weights W as val and detect do, runs the
//       model in eval mode (fused, or with test-time augmentation) on IN's tensor `x`, writes the
//       decoded output as OUT's `y` (both {name: tensor} files that torch.load reads)
#include <cstdio>
#include <exception>
#include <string>

#include "models/weights.h"
#include "models/yolo.h"
#include "utils/eval/model_loader.h"

namespace {

int summary(const std::string& cfg) {
  yolo::DetectionModel model = yolo::build_model(cfg);
  std::printf("params %lld\n", static_cast<long long>(model->num_parameters()));
  for (const auto& [name, t] : yolo::state_dict(*model)) {
    std::string shape;
    for (int64_t d : t.sizes()) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    std::printf("entry %s %s\n", name.c_str(), shape.empty() ? "scalar" : shape.c_str());
  }
  std::printf("strides");
  for (int s : model->strides()) std::printf(" %d", s);
  std::printf("\n");
  return 0;
}

int forward(const std::string& weights, const std::string& in, const std::string& out,
            const std::string& how) {
  yolo::LoadedModel loaded = yolo::load_model_for_inference(weights, "", "");
  loaded.model->eval();
  if (how == "fused") loaded.model->fuse();
  torch::NoGradGuard no_grad;
  const torch::Tensor x = yolo::read_state_dict(in).at("x");
  const torch::Tensor y =
      how == "augment" ? loaded.model->forward_augment(x) : loaded.model->forward(x).pred;
  yolo::write_state_dict({{"y", y}}, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "summary" && argc == 3) return summary(argv[2]);
    if (mode == "forward" && (argc == 5 || argc == 6)) {
      return forward(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : "");
    }
    std::fprintf(stderr,
                 "usage: model_probe summary CFG | forward WEIGHTS IN OUT [fused|augment]\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_probe: %s\n", e.what());
    return 1;
  }
}

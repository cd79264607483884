// What tests/interop/test_yolov5_models.py compares with YOLOv5's own models:
//   model_probe summary CFG           the parameter count, then each state_dict entry and shape
//   model_probe forward W IN OUT [fused|augment]  loads weights W as val and detect do, runs the
//       model in eval mode (fused, or with test-time augmentation) on IN's tensor `x`, writes the
//       decoded output as OUT's `y` (both {name: tensor} files that torch.load reads)
//   model_probe state CFG SD IN OUT   builds CFG, loads the state_dict file SD (every entry must
//       match), and writes for IN's `x` the eval-mode raw maps (`raw.<level>`, and the one-to-one
//       head's `raw_o2o.<level>` for an end-to-end model) and decoded `y`;
//       with IN's `targets` (n, 6) also the train-mode loss (`loss`, `items`), the assignment
//       (`fg`, `target_bboxes`, `target_scores`; an end-to-end model's one-to-one assignment
//       with the suffix `_o2o`) and every parameter's gradient (`grad.<name>`)
//   model_probe musgd CFG SD IN OUT   two MuSGD steps from SD with IN's gradients (`g1.<name>`,
//       `g2.<name>`), as training sets MuSGD up; writes the parameters
#include <cstdio>
#include <exception>
#include <string>

#include "models/anchor_free_detect.h"
#include "models/weights.h"
#include "models/yolo.h"
#include "utils/engine/optim.h"
#include "utils/engine/optimizer_step.h"
#include "utils/eval/anchor_free_loss.h"
#include "utils/eval/end2end_loss.h"
#include "utils/eval/model_family.h"
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

int state(const std::string& cfg, const std::string& sd_path, const std::string& in,
          const std::string& out) {
  yolo::DetectionModel model = yolo::build_model(cfg);
  const yolo::LoadReport r = yolo::load_state_dict(*model, yolo::read_state_dict(sd_path));
  if (r.transferred != r.total || r.unexpected) {
    std::fprintf(stderr, "model_probe: %s matched %d of %d entries (%d unexpected)\n",
                 sd_path.c_str(), r.transferred, r.total, r.unexpected);
    return 1;
  }
  const yolo::StateDict input = yolo::read_state_dict(in);
  const torch::Tensor x = input.at("x");
  yolo::StateDict result;
  {
    torch::NoGradGuard no_grad;
    model->eval();
    const yolo::ModelOutput o = model->forward(x);
    // Both heads of an end-to-end model: the one-to-many levels, then the one-to-one ones.
    const size_t nl = model->head().num_levels();
    for (size_t i = 0; i < o.raw.size(); ++i) {
      result[(i < nl ? "raw." : "raw_o2o.") + std::to_string(i % nl)] = o.raw[i];
    }
    result["y"] = o.pred;
  }
  if (input.count("targets")) {
    model->train();
    const torch::Tensor targets = input.at("targets");
    yolo::LossConfig config;
    const auto loss = yolo::model_family(*model).make_loss(*model, config);
    const std::vector<torch::Tensor> raw = model->forward_raw(x);
    const yolo::LossResult lr = (*loss)(raw, targets);
    lr.loss.sum().backward();
    result["loss"] = lr.loss.detach();
    result["items"] = lr.items;
    const auto write_assignment = [&](const yolo::AnchorFreeLoss& af,
                                      const std::vector<torch::Tensor>& maps,
                                      const std::string& suffix) {
      const auto parts = af.assign(maps, targets);
      result["fg" + suffix] = parts.assigned.fg;
      result["target_bboxes" + suffix] = parts.assigned.bboxes;
      result["target_scores" + suffix] = parts.assigned.scores;
    };
    if (const auto* af = dynamic_cast<const yolo::AnchorFreeLoss*>(loss.get())) {
      write_assignment(*af, raw, "");
    } else if (const auto* e2e = dynamic_cast<const yolo::End2EndLoss*>(loss.get())) {
      const auto [o2m, o2o] = e2e->split(raw);
      write_assignment(e2e->one2many(), o2m, "");
      write_assignment(e2e->one2one(), o2o, "_o2o");
    }
    for (const auto& kv : model->named_parameters()) {
      if (kv.value().grad().defined()) result["grad." + kv.key()] = kv.value().grad();
    }
  }
  yolo::write_state_dict(result, out);
  return 0;
}

// Two MuSGD steps as training takes them (lr 0.01, momentum 0.9, weight decay 5e-4, the
// classification branches at 3x lr) with IN's gradients `g1.<name>` then `g2.<name>`; writes the
// parameters after them.
int musgd(const std::string& cfg, const std::string& sd_path, const std::string& in,
          const std::string& out) {
  yolo::DetectionModel model = yolo::build_model(cfg);
  yolo::load_state_dict(*model, yolo::read_state_dict(sd_path));
  yolo::ModelOptimizer mo = yolo::make_model_optimizer("MuSGD", *model, 0.01, 0.9, 5e-4);
  yolo::OptimizerStep step(*mo.optimizer, "MuSGD", yolo::OptimizerStep::Kernel::kForeach);
  const yolo::StateDict grads = yolo::read_state_dict(in);
  for (const std::string prefix : {"g1.", "g2."}) {
    for (auto& kv : model->named_parameters()) {
      const auto it = grads.find(prefix + kv.key());
      if (it != grads.end()) kv.value().mutable_grad() = it->second.clone();
    }
    step.step();
    step.zero_grad();
  }
  yolo::StateDict result;
  for (const auto& kv : model->named_parameters()) result[kv.key()] = kv.value().detach();
  yolo::write_state_dict(result, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "summary" && argc == 3) return summary(argv[2]);
    if (mode == "state" && argc == 6) return state(argv[2], argv[3], argv[4], argv[5]);
    if (mode == "musgd" && argc == 6) return musgd(argv[2], argv[3], argv[4], argv[5]);
    if (mode == "forward" && (argc == 5 || argc == 6)) {
      return forward(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : "");
    }
    std::fprintf(stderr,
                 "usage: model_probe summary CFG | forward WEIGHTS IN OUT [fused|augment] | "
                 "state CFG SD IN OUT | musgd CFG SD IN OUT\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_probe: %s\n", e.what());
    return 1;
  }
}

#include "apps/train/train_setup.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <iostream>

#include "models/weights.h"
#include "utils/errors.h"
#include "utils/log.h"
#include "utils/yaml_io.h"

namespace yolo {

int check_img_size(int imgsz, int stride) {
  if (imgsz < 1) throw UsageError("--imgsz: must be >= 1 (got " + std::to_string(imgsz) + ")");
  const int rounded = std::max((imgsz + stride - 1) / stride * stride, 2 * stride);
  if (rounded != imgsz) {
    log_warn("--imgsz " + std::to_string(imgsz) + " must be multiple of max stride " +
             std::to_string(stride) + ", updating to " + std::to_string(rounded));
  }
  return rounded;
}

int dataset_num_classes(const std::string& data_yaml, bool single_cls) {
  const YAML::Node d = load_yaml_file(data_yaml);
  if (!d.IsMap()) throw std::runtime_error(data_yaml + ": a dataset YAML must be a mapping");
  const YAML::Node names = d["names"];
  if (!names || !(names.IsSequence() || names.IsMap()) || names.size() == 0) {
    throw std::runtime_error(data_yaml + ": 'names' must be a non-empty list or {id: name} map");
  }
  const int n = static_cast<int>(names.size());
  if (d["nc"] && yaml_get<int>(d, "nc", data_yaml) != n) {
    throw std::runtime_error(data_yaml + ": nc=" + d["nc"].Scalar() + " but 'names' has " +
                             std::to_string(n) + " entries; make them agree");
  }
  return single_cls ? 1 : n;
}

TrainSetup prepare_training(Options opt) {
  resolve_option_files(opt);
  TrainSetup s;
  s.device = select_device(opt.device, opt.batch_size);
  log_info("YOLOv5 C++ trainer, torch " + std::string(TORCH_VERSION) + " " + s.device.description);
  if (opt.sync_bn) log_warn("--sync-bn is only used in DDP mode; ignored for this single process");
  load_yaml_file(opt.hyp);  // syntax and presence are checked before any work
  s.nc = dataset_num_classes(opt.data, opt.single_cls);
  s.model = build_model(opt.cfg, s.nc);
  if (!opt.weights.empty()) load_weights(*s.model, opt.weights);
  s.model->to(s.device.device);
  log_info(s.model->summary());
  s.imgsz = check_img_size(opt.imgsz, s.model->max_stride());
  s.opt = std::move(opt);
  return s;
}

int train_main(int argc, char** argv) {
  const ParsedTrainArgs args = parse_train_args(argc, argv);
  if (args.help) {
    std::cout << args.help_text;
    return 0;
  }
  TrainSetup setup = prepare_training(args.opt);
  log_error(
      "train: set-up checked (options, device, data YAML, model, weights), but the training "
      "loop is not implemented yet in this build; nothing was trained or written");
  return 1;
}

}  // namespace yolo

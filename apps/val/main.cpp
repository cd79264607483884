// val: evaluates weights on a dataset split, printing YOLOv5's results table (val.py flags).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "data/dataset.h"
#include "data/dataset_config.h"
#include "utils/core/app_main.h"
#include "utils/core/cli.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/device.h"
#include "utils/eval/inference_model.h"
#include "utils/eval/validator.h"

namespace {

// val.py's flags and defaults.
struct ValArgs {
  std::string weights, data, cfg;
  int imgsz = 640;
  int batch_size = 32;
  double conf_thres = 0.001, iou_thres = 0.6;
  int max_det = 300;
  std::string task = "val";
  std::string device;
  int workers = 8;
  bool single_cls = false, save_txt = false, save_conf = false, save_json = false;
  std::string project = "runs/val", name = "exp";
  bool exist_ok = false, verbose = false, noplots = false, half = false, augment = false;
};

const std::vector<yolo::cli::Flag<ValArgs>>& flags() {
  using A = ValArgs;
  using yolo::cli::at_least;
  using yolo::cli::Bind;
  using yolo::cli::in_range;
  static const std::vector<yolo::cli::Flag<A>> table = {
      Bind("weights", &A::weights, "model weights path").metavar("PATH"),
      Bind("data", &A::data, "dataset YAML (default: the one the weights were trained on)")
          .metavar("PATH"),
      Bind("cfg", &A::cfg, "model YAML (default: from the checkpoint)").metavar("PATH"),
      Bind("imgsz", &A::imgsz, "inference size in pixels").alias("--img").alias("--img-size"),
      Bind("batch-size", &A::batch_size, "batch size")
          .alias("--batch")
          .check(at_least(1, "must be >= 1")),
      Bind("conf-thres", &A::conf_thres, "confidence threshold").check(in_range(0, 1)),
      Bind("iou-thres", &A::iou_thres, "NMS IoU threshold").check(in_range(0, 1)),
      Bind("max-det", &A::max_det, "maximum detections per image")
          .check(at_least(1, "must be >= 1")),
      Bind("task", &A::task, "val or test").metavar("val|test").check([](const std::string& t) {
        return t == "val" || t == "test" ? std::string() : std::string("must be val or test");
      }),
      Bind("device", &A::device, "cuda device, i.e. 0 or cpu"),
      Bind("workers", &A::workers, "max dataloader workers").check(at_least(0)),
      Bind("single-cls", &A::single_cls, "treat as single-class dataset"),
      Bind("save-txt", &A::save_txt, "save results to *.txt"),
      Bind("save-conf", &A::save_conf, "save confidences in --save-txt labels"),
      Bind("save-json", &A::save_json, "save a COCO-JSON results file"),
      Bind("project", &A::project, "save to project/name").metavar("DIR"),
      Bind("name", &A::name, "save to project/name"),
      Bind("exist-ok", &A::exist_ok, "existing project/name ok, do not increment"),
      Bind("verbose", &A::verbose, "report mAP by class"),
      Bind("noplots", &A::noplots, "save no plot files"),
      Bind("augment", &A::augment, "augmented inference (flips and scales; .pt weights)"),
      Bind("half", &A::half, "use FP16 half-precision inference (CUDA)"),
  };
  return table;
}

int run(int argc, char** argv) {
  const yolo::cli::Parsed<ValArgs> p = yolo::cli::parse(flags(), argc, argv, "val");
  if (p.help) {
    std::cout << yolo::cli::help_text(yolo::cli::specs_of(flags()),
                                      "Validate YOLOv5 weights on a dataset (YOLOv5 v7.0 val.py "
                                      "flags)",
                                      "val", yolo::version_help());
    return 0;
  }
  if (p.version) {
    std::cout << yolo::version_report();
    return 0;
  }
  const ValArgs& a = p.values;
  const std::string bad = yolo::cli::first_bad_value(flags(), a);
  if (!bad.empty()) throw yolo::UsageError(bad);
  const std::string task = a.task;
  const int batch = a.batch_size;
  const double conf = a.conf_thres, iou = a.iou_thres;
  std::string data = a.data;
  if (!data.empty()) data = yolo::resolve_config(data, yolo::ConfigKind::kData, "--data");
  const yolo::DeviceSelection dev = yolo::select_device(a.device, batch);

  yolo::InferenceOptions io;
  io.cfg = a.cfg;
  io.data = data;
  io.device = dev.device;
  io.fuse = true;  // as YOLOv5's val.py (DetectMultiBackend fuses)
  io.augment = a.augment;
  yolo::InferenceModel model(a.weights, io);
  const std::string data_yaml = data.empty() ? model.checkpoint_data() : data;
  if (data_yaml.empty()) throw yolo::UsageError("--data: required for these weights");
  const bool single_cls = a.single_cls || model.single_cls();
  const int gs = model.stride();
  int imgsz = yolo::check_img_size(a.imgsz, gs);
  // A file fixed to one input size: every image is resized to --imgsz (at most that size) and
  // letterboxed into it, YOLOv5's square protocol when the export's size is --imgsz.
  const bool fixed = model.fixed_height() > 0;
  const int shape_h = fixed ? static_cast<int>(model.fixed_height()) : imgsz;
  const int shape_w = fixed ? static_cast<int>(model.fixed_width()) : imgsz;
  if (fixed && imgsz > std::min(shape_h, shape_w)) {
    yolo::log_info(a.weights + " takes " + std::to_string(shape_h) + "x" + std::to_string(shape_w) +
                   " images: validating at --imgsz " + std::to_string(std::min(shape_h, shape_w)));
    imgsz = std::min(shape_h, shape_w);
  }
  const yolo::DatasetConfig dc =
      yolo::load_dataset_config(yolo::resolve_config(data_yaml, yolo::ConfigKind::kData, "--data"));
  if (!model.pytorch() && !single_cls && dc.nc != model.nc()) {
    throw yolo::UsageError("--data: " + dc.yaml_path + " names " + std::to_string(dc.nc) +
                           " classes but " + a.weights + " detects " + std::to_string(model.nc()) +
                           "; pass the data it was trained on");
  }
  yolo::ensure_dataset(dc);
  if (dc.split(task).empty())
    throw yolo::UsageError("--task " + task + ": " + dc.yaml_path + " has no '" + task + "' split");

  yolo::DatasetOptions o;
  o.imgsz = imgsz;
  o.batch_size = batch;
  o.rect = !fixed;
  if (fixed) o.letterbox_shape = cv::Size(shape_w, shape_h);
  o.pad = 0.5;
  o.stride = gs;
  o.single_cls = single_cls;
  o.nc = model.nc();
  o.hyp = yolo::AugmentHyp::none();
  auto ds = std::make_shared<yolo::YoloDataset>(dc.split(task), o);
  yolo::LoaderOptions lo;
  lo.batch_size = batch;
  lo.workers = a.workers;
  lo.shuffle = false;
  lo.float_images = false;               // bytes travel; images_to_device converts them there
  lo.pin_memory = dev.device.is_cuda();  // so that the copies do not wait for the device
  lo.prefetch_next_epoch = false;        // one pass: nothing to load ahead for
  lo.device = dev.device;                // the workers' current GPU, for their pinned memory
  yolo::DataLoader loader(ds, lo);

  yolo::ValConfig cfg;
  cfg.conf_thres = conf;
  cfg.iou_thres = iou;
  cfg.max_det = a.max_det;
  cfg.half = a.half;  // as val.py: float32 unless asked
  cfg.names = model.names();
  cfg.save_txt = a.save_txt;
  cfg.save_conf = a.save_conf;
  cfg.save_json = a.save_json;
  cfg.json_name = std::filesystem::path(a.weights).stem().string() + "_predictions.json";
  cfg.coco91 = yolo::is_coco_dataset(dc);
  cfg.verbose = a.verbose;
  cfg.save_dir =
      yolo::increment_path((std::filesystem::path(a.project) / a.name).string(), a.exist_ok, true);
  cfg.plots = !a.noplots;
  yolo::ValResult res;
  yolo::DetectionModel* m = model.pytorch();
  if (m && !a.augment) {
    res = yolo::run_validation(*m, loader, cfg, nullptr, dev.device);
  } else {
    const yolo::ValModel exported{[&model](const at::Tensor& im) {
                                    yolo::ModelOutput out;
                                    out.pred = model.predict(im);
                                    return out;
                                  },
                                  model.nc()};
    res = yolo::run_validation(exported, loader, cfg, nullptr, dev.device);
  }
  yolo::log_info(yolo::format_val_table(res, model.names(),
                                        cfg.verbose || model.names().size() < 50, !cfg.progress));
  char speed[256];
  std::snprintf(speed, sizeof(speed),
                "Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape "
                "(%d, 3, %d, %d)",
                res.ms_pre, res.ms_inf, res.ms_nms, batch, shape_h, shape_w);
  yolo::log_info(speed);
  if (cfg.save_json) {
    const std::string json = (std::filesystem::path(cfg.save_dir) / cfg.json_name).string();
    yolo::evaluate_coco_json(json, dc, ds->image_files(), res);
  }
  yolo::log_info("Results saved to " + cfg.save_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return yolo::run_app("val", [&] { return run(argc, argv); });
}

// val: evaluates weights on a dataset split, printing YOLOv5's results table (val.py flags).
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <memory>

#include "data/dataset.h"
#include "data/dataset_config.h"
#include "utils/core/app_main.h"
#include "utils/core/cuda_env.h"
#include "utils/core/device.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"
#include "utils/core/options.h"
#include "utils/core/paths.h"
#include "utils/eval/model_loader.h"
#include "utils/eval/validator.h"

namespace {

int run(int argc, char** argv) {
  cxxopts::Options cli("val", "Validate YOLOv5 weights on a dataset");
  cli.add_options()("weights", "model weights path",
                    cxxopts::value<std::string>()->default_value(""))(
      "data", "dataset YAML (default: the one the weights were trained on)",
      cxxopts::value<std::string>()->default_value(""))(
      "cfg", "model YAML (default: from the checkpoint)",
      cxxopts::value<std::string>()->default_value(""))(
      "imgsz", "inference size in pixels (aliases --img, --img-size)",
      cxxopts::value<int>()->default_value("640"))("batch-size", "batch size",
                                                   cxxopts::value<int>()->default_value("32"))(
      "conf-thres", "confidence threshold", cxxopts::value<double>()->default_value("0.001"))(
      "iou-thres", "NMS IoU threshold", cxxopts::value<double>()->default_value("0.6"))(
      "max-det", "maximum detections per image", cxxopts::value<int>()->default_value("300"))(
      "task", "val or test", cxxopts::value<std::string>()->default_value("val"))(
      "device", "cuda device, i.e. 0 or cpu", cxxopts::value<std::string>()->default_value(""))(
      "workers", "max dataloader workers", cxxopts::value<int>()->default_value("8"))(
      "single-cls", "treat as single-class dataset")("save-txt", "save results to *.txt")(
      "save-conf", "save confidences in --save-txt labels")("save-json",
                                                            "save a COCO-JSON results file")(
      "project", "save to project/name", cxxopts::value<std::string>()->default_value("runs/val"))(
      "name", "save to project/name", cxxopts::value<std::string>()->default_value("exp"))(
      "exist-ok", "existing project/name ok, do not increment")("verbose", "report mAP by class")(
      "noplots", "save no plot files")("half", "use FP16 half-precision inference (CUDA)")(
      "version", "print the versions of LibTorch, CUDA, cuDNN, NCCL and the GPUs seen, and exit")(
      "h,help", "show this help and exit");
  const cxxopts::ParseResult r = yolo::parse_app_args(cli, argc, argv, "val");
  if (r.count("help")) {
    std::cout << cli.help();
    return 0;
  }
  if (r.count("version")) {
    std::cout << yolo::version_report();
    return 0;
  }
  const std::string task = r["task"].as<std::string>();
  if (task != "val" && task != "test") throw yolo::UsageError("--task: must be val or test");
  const int batch = r["batch-size"].as<int>();
  if (batch < 1) throw yolo::UsageError("--batch-size: must be >= 1");
  const double conf = r["conf-thres"].as<double>(), iou = r["iou-thres"].as<double>();
  if (conf < 0 || conf > 1) throw yolo::UsageError("--conf-thres: must be in [0, 1]");
  if (iou < 0 || iou > 1) throw yolo::UsageError("--iou-thres: must be in [0, 1]");
  std::string data = r["data"].as<std::string>();
  if (!data.empty()) data = yolo::resolve_config(data, yolo::ConfigKind::kData, "--data");
  const yolo::DeviceSelection dev = yolo::select_device(r["device"].as<std::string>(), batch);

  yolo::LoadedModel lm = yolo::load_model_for_inference(r["weights"].as<std::string>(),
                                                        r["cfg"].as<std::string>(), data);
  if (lm.data.empty()) throw yolo::UsageError("--data: required for these weights");
  const bool single_cls = r["single-cls"].as<bool>() || lm.single_cls;
  lm.model->to(dev.device);
  if (dev.device.is_cpu()) yolo::to_channels_last(*lm.model);  // faster convolutions on CPU
  lm.model->eval();
  const int gs = lm.model->max_stride();
  const int imgsz = yolo::check_img_size(r["imgsz"].as<int>(), gs);
  const yolo::DatasetConfig dc =
      yolo::load_dataset_config(yolo::resolve_config(lm.data, yolo::ConfigKind::kData, "--data"));
  yolo::ensure_dataset(dc);
  if (dc.split(task).empty())
    throw yolo::UsageError("--task " + task + ": " + dc.yaml_path + " has no '" + task + "' split");

  yolo::DatasetOptions o;
  o.imgsz = imgsz;
  o.batch_size = batch;
  o.rect = true;
  o.pad = 0.5;
  o.stride = gs;
  o.single_cls = single_cls;
  o.nc = lm.model->nc();
  o.hyp = yolo::AugmentHyp::none();
  auto ds = std::make_shared<yolo::YoloDataset>(dc.split(task), o);
  yolo::LoaderOptions lo;
  lo.batch_size = batch;
  lo.workers = r["workers"].as<int>();
  lo.shuffle = false;
  lo.float_images = false;               // bytes travel; images_to_device converts them there
  lo.pin_memory = dev.device.is_cuda();  // so that the copies do not wait for the device
  lo.prefetch_next_epoch = false;        // one pass: nothing to load ahead for
  yolo::DataLoader loader(ds, lo);

  yolo::ValConfig cfg;
  cfg.conf_thres = conf;
  cfg.iou_thres = iou;
  cfg.max_det = r["max-det"].as<int>();
  cfg.half = r["half"].as<bool>();  // as val.py: float32 unless asked
  cfg.names = lm.names;
  cfg.save_txt = r["save-txt"].as<bool>();
  cfg.save_conf = r["save-conf"].as<bool>();
  cfg.save_json = r["save-json"].as<bool>();
  cfg.json_name =
      std::filesystem::path(r["weights"].as<std::string>()).stem().string() + "_predictions.json";
  cfg.coco91 = yolo::is_coco_dataset(dc);
  cfg.verbose = r["verbose"].as<bool>();
  cfg.save_dir = yolo::increment_path(
      (std::filesystem::path(r["project"].as<std::string>()) / r["name"].as<std::string>())
          .string(),
      r["exist-ok"].as<bool>(), true);
  cfg.plots = !r["noplots"].as<bool>();
  yolo::ValResult res = yolo::run_validation(lm.model, loader, cfg, nullptr, dev.device);
  yolo::log_info(
      yolo::format_val_table(res, lm.names, cfg.verbose || lm.names.size() < 50, !cfg.progress));
  char speed[256];
  std::snprintf(speed, sizeof(speed),
                "Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape "
                "(%d, 3, %d, %d)",
                res.ms_pre, res.ms_inf, res.ms_nms, batch, imgsz, imgsz);
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

#include "utils/eval/val_main.h"

#include <torch/cuda.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "data/dataset.h"
#include "data/dataset_config.h"
#include "data/file_lists.h"
#include "utils/core/cli.h"
#include "utils/core/cpu_threads.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/device.h"
#include "utils/eval/inference_model.h"
#include "utils/eval/model_family.h"
#include "utils/eval/validator.h"
#include "utils/viz/plots.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {

// val's default NMS IoU: the model family's.
double family_val_iou(const InferenceModel& model) {
  return model_family_of(model.anchor_free()).val_iou;
}

constexpr char kIncompleteMarker[] = "INCOMPLETE.txt";

const std::vector<cli::Flag<ValArgs>>& flags() {
  using A = ValArgs;
  using cli::at_least;
  using cli::Bind;
  using cli::in_range;
  static const std::vector<cli::Flag<A>> table = {
      Bind("weights", &A::weights, "model weights path(s); several for --task speed|study")
          .metavar("PATH"),
      Bind("data", &A::data, "dataset YAML (default: the one the weights were trained on)")
          .metavar("PATH"),
      Bind("cfg", &A::cfg, "model YAML (default: from the checkpoint)").metavar("PATH"),
      Bind("imgsz", &A::imgsz, "inference size in pixels")
          .alias("--img")
          .alias("--img-size")
          .check(cli::image_size),
      Bind("batch-size", &A::batch_size, "batch size")
          .alias("--batch")
          .check(at_least(1, "must be >= 1")),
      Bind("conf-thres", &A::conf_thres, "confidence threshold").check(in_range(0, 1)),
      Bind("iou-thres", &A::iou_thres,
           "NMS IoU threshold (default -1: 0.6, or 0.7 for anchor-free YOLOv8/YOLO11 weights)")
          .check([](const double& v) { return v == -1 ? std::string() : in_range(0, 1)(v); }),
      Bind("max-det", &A::max_det, "maximum detections per image")
          .check(at_least(1, "must be >= 1")),
      Bind("end2end", &A::end2end,
           "end-to-end models (YOLO26): the one-to-one head's top detections, no NMS"),
      Bind("task", &A::task, "val, test, speed or study")
          .metavar("val|test|speed|study")
          .check([](const std::string& t) {
            return t == "val" || t == "test" || t == "speed" || t == "study"
                       ? std::string()
                       : std::string("must be val, test, speed or study");
          }),
      Bind("device", &A::device, "cuda device, i.e. 0 or cpu"),
      Bind("workers", &A::workers, "max dataloader workers").check(at_least(0)),
      Bind("single-cls", &A::single_cls, "treat as single-class dataset"),
      Bind("save-txt", &A::save_txt, "save results to *.txt"),
      Bind("save-conf", &A::save_conf, "save confidences in --save-txt labels"),
      Bind("save-json", &A::save_json, "save a COCO-JSON results file"),
      Bind("project", &A::project, "save to project/name").metavar("DIR"),
      Bind("name", &A::name, "save to project/name").check(cli::run_name),
      Bind("exist-ok", &A::exist_ok, "existing project/name ok, do not increment"),
      Bind("verbose", &A::verbose, "report mAP by class"),
      Bind("noplots", &A::noplots, "save no plot files"),
      Bind("augment", &A::augment, "augmented inference (flips and scales; .pt weights)"),
      Bind("half", &A::half, "use FP16 half-precision inference (CUDA)"),
      Bind("cache-dir", &A::cache_dir,
           "folder for the label cache (a read-only dataset); default: beside the data, or "
           "$YOLO_CACHE_DIR")
          .metavar("DIR"),
  };
  return table;
}

// One validation's result and what its report needs.
struct ValOutcome {
  ValResult res;
  std::vector<std::string> names;
  std::string data_yaml;
  int batch = 0, shape_h = 0, shape_w = 0;
};

InferenceOptions inference_options(const ValArgs& a, const std::string& data,
                                   const torch::Device& device) {
  InferenceOptions io;
  io.cfg = a.cfg;
  io.data = data;
  io.device = device;
  io.fuse = true;  // as YOLOv5's val.py (DetectMultiBackend fuses)
  io.augment = a.augment;
  io.end2end = a.end2end;
  return io;
}

// --device, or under torchrun this rank's GPU (shared round-robin when there are fewer: the
// ranks exchange statistics through the store, not NCCL).
DeviceSelection val_device(const ValArgs& a, const ValRanks& ranks) {
  DeviceSelection dev = select_device(a.device, ranks.exchange ? 0 : a.batch_size);
  if (ranks.exchange && dev.device.is_cuda()) {
    dev = rank_device(dev, ranks.local_rank, ranks.local_world_size,
                      static_cast<int>(torch::cuda::device_count()), true);
    set_current_cuda_device(dev.device);
  }
  if (dev.device.is_cpu()) start_threads_on_cpu();
  return dev;
}

// The split's loader; under torchrun this rank's contiguous share of the batches.
std::unique_ptr<DataLoader> val_loader(std::shared_ptr<YoloDataset> ds, const ValArgs& a,
                                       const torch::Device& device, const RankExchange* ex) {
  LoaderOptions lo;
  lo.batch_size = a.batch_size;
  if (ex) {
    lo.world_size = ex->size();
    lo.rank = ex->rank();
    lo.contiguous_batches = true;
  }
  lo.workers = a.workers;
  lo.shuffle = false;
  lo.float_images = false;           // bytes travel; images_to_device converts them there
  lo.pin_memory = device.is_cuda();  // so that the copies do not wait for the device
  lo.prefetch_next_epoch = false;    // one pass: nothing to load ahead for
  lo.device = device;                // the workers' current GPU, for their pinned memory
  return std::make_unique<DataLoader>(std::move(ds), lo);
}

// The validation val.py's run() does for one set of weights at one image size, reported as it
// reports it (the results table and the speed line).
ValOutcome validate(const ValArgs& a, const std::string& weights, int imgsz_flag,
                    const std::string& save_dir, bool plots, const ValRanks& ranks) {
  const int batch = a.batch_size;
  const RankExchange* ex = ranks.exchange;
  const bool rank0 = !ex || ex->rank() == 0;
  std::string data = a.data;
  if (!data.empty()) data = resolve_config(data, ConfigKind::kData, "--data");
  const DeviceSelection dev = val_device(a, ranks);
  InferenceModel model(weights, inference_options(a, data, dev.device));
  ValOutcome out;
  out.data_yaml = data;
  if (data.empty()) {
    // The data the weights were trained on, said before it is read: a checkpoint from an older
    // run may hold a path relative to wherever that run was started.
    if (model.checkpoint_data().empty()) throw UsageError("--data: required for " + weights);
    out.data_yaml = resolve_config(model.checkpoint_data(), ConfigKind::kData,
                                   weights + "'s training data (pass --data to choose)");
    log_info("data: " + out.data_yaml + " (" + weights +
             " was trained on it; --data chooses another)");
  }
  const bool single_cls = a.single_cls || model.single_cls();
  const int gs = model.stride();
  int imgsz = check_img_size(imgsz_flag, gs);
  // A file fixed to one input size: every image is resized to --imgsz (at most that size) and
  // letterboxed into it, YOLOv5's square protocol when the export's size is --imgsz.
  const bool fixed = model.fixed_height() > 0;
  out.shape_h = fixed ? static_cast<int>(model.fixed_height()) : imgsz;
  out.shape_w = fixed ? static_cast<int>(model.fixed_width()) : imgsz;
  if (fixed && imgsz > std::min(out.shape_h, out.shape_w)) {
    log_info(weights + " takes " + std::to_string(out.shape_h) + "x" + std::to_string(out.shape_w) +
             " images: validating at --imgsz " +
             std::to_string(std::min(out.shape_h, out.shape_w)));
    imgsz = std::min(out.shape_h, out.shape_w);
  }
  const DatasetConfig dc = load_dataset_config(out.data_yaml);
  if (!model.pytorch() && !single_cls && dc.nc != model.nc()) {
    throw UsageError("--data: " + dc.yaml_path + " names " + std::to_string(dc.nc) +
                     " classes but " + weights + " detects " + std::to_string(model.nc()) +
                     "; pass the data it was trained on");
  }
  ensure_dataset(dc);
  // speed and study validate the val split, as val.py's run() does for tasks other than test.
  const std::string split = a.task == "test" ? "test" : "val";
  if (dc.split(split).empty()) {
    throw UsageError("--task " + a.task + ": " + dc.yaml_path + " has no '" + split + "' split");
  }

  DatasetOptions o;
  o.imgsz = imgsz;
  o.batch_size = batch;
  // --task speed benchmarks square inference (val.py: rect off, pad 0).
  const bool square = a.task == "speed";
  o.rect = !fixed && !square;
  if (fixed) o.letterbox_shape = cv::Size(out.shape_w, out.shape_h);
  o.pad = square ? 0.0 : 0.5;
  o.stride = gs;
  o.single_cls = single_cls;
  o.nc = model.nc();
  o.hyp = AugmentHyp::none();
  o.ranks = ex;  // the ranks check the labels together
  o.cache_dir = resolve_cache_dir(a.cache_dir);
  auto ds = std::make_shared<YoloDataset>(dc.split(split), o);
  const std::unique_ptr<DataLoader> loader_ptr = val_loader(ds, a, dev.device, ex);
  DataLoader& loader = *loader_ptr;

  ValConfig cfg;
  cfg.conf_thres = a.conf_thres;
  cfg.iou_thres = a.iou_thres >= 0 ? a.iou_thres : family_val_iou(model);
  cfg.protocol = model_family_of(model.anchor_free()).val_protocol;
  cfg.max_det = a.max_det;
  cfg.end2end = model.end2end();
  // As val.py: float32 unless asked; speed and study use float16 on a GPU.
  cfg.half = a.half || (dev.device.is_cuda() && (a.task == "speed" || a.task == "study"));
  cfg.names = model.names();
  cfg.save_txt = a.save_txt;
  cfg.save_conf = a.save_conf;
  cfg.save_json = a.save_json;
  cfg.json_name = fs::path(weights).stem().string() + "_predictions.json";
  cfg.coco91 = is_coco_dataset(dc);
  cfg.verbose = a.verbose;
  cfg.save_dir = save_dir;
  cfg.plots = plots;
  cfg.ranks = ex;
  cfg.progress = rank0;
  DetectionModel* m = model.pytorch();
  if (m && !a.augment) {
    out.res = run_validation(*m, loader, cfg, nullptr, dev.device);
  } else {
    const ValModel exported{[&model](const at::Tensor& im) {
                              ModelOutput mo;
                              mo.pred = model.predict(im);
                              return mo;
                            },
                            model.nc()};
    out.res = run_validation(exported, loader, cfg, nullptr, dev.device);
  }
  out.names = model.names();
  out.batch = batch;
  log_info(
      format_val_table(out.res, out.names, cfg.verbose || out.names.size() < 50, !cfg.progress));
  char speed[256];
  std::snprintf(speed, sizeof(speed),
                "Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape "
                "(%d, 3, %d, %d)",
                out.res.ms_pre, out.res.ms_inf, out.res.ms_nms, batch, out.shape_h, out.shape_w);
  log_info(speed);
  if (cfg.save_json && rank0) {
    evaluate_coco_json((fs::path(save_dir) / cfg.json_name).string(), dc, ds->image_files(),
                       out.res);
  }
  return out;
}

// --task study: each weights at each study size, one text file per weights, then study.png.
void run_study(const ValArgs& a, const std::string& save_dir, const ValRanks& ranks) {
  const bool rank0 = !ranks.exchange || ranks.exchange->rank() == 0;
  std::vector<std::string> files;
  for (const std::string& w : a.weights) {
    std::string data_stem;
    std::string text;
    for (int imgsz : study_sizes()) {
      log_info("\nRunning study of " + w + " --imgsz " + std::to_string(imgsz) + "...");
      const ValOutcome v = validate(a, w, imgsz, save_dir, false, ranks);
      data_stem = fs::path(v.data_yaml).stem().string();
      const ValResult& r = v.res;
      text += study_row({r.mp, r.mr, r.map50, r.map, r.loss[0], r.loss[1], r.loss[2], r.ms_pre,
                         r.ms_inf, r.ms_nms}) +
              "\n";
    }
    const fs::path f =
        fs::path(save_dir) / ("study_" + data_stem + "_" + fs::path(w).stem().string() + ".txt");
    if (!rank0) continue;
    write_file_atomic(f.string(), text);
    files.push_back(f.string());
    log_info("Saved " + f.string());
  }
  if (!a.noplots && rank0) {
    const std::string png = (fs::path(save_dir) / "study.png").string();
    plot_val_study(files, study_sizes(), png);
    log_info("Saved " + png);
  }
}

int run(const ValArgs& a, const ValRanks& ranks) {
  const RankExchange* ex = ranks.exchange;
  const bool rank0 = !ex || ex->rank() == 0;
  if (a.weights.empty()) throw UsageError("--weights: required");
  const bool single = a.task == "val" || a.task == "test";
  if (single && a.weights.size() > 1) {
    throw UsageError("--weights: one file for --task " + a.task +
                     " (several are for --task speed or study; model ensembles are not "
                     "supported)");
  }
  if (single && a.conf_thres > 0.001) {
    log_warn("confidence threshold " + format_number("%g", a.conf_thres) +
             " > 0.001 produces invalid results");
  }
  // Rank 0 makes the folder; the others write there only --save-txt's files.
  std::string save_dir =
      rank0 ? increment_path((fs::path(a.project) / a.name).string(), a.exist_ok, true) : "";
  if (ex) save_dir = ex->broadcast_from_rank0("the run folder", save_dir);
  // Plots and JSON are written as validation goes: until it finishes, a file in the folder says
  // that they are partial, so that a run stopped by a signal (or killed) is not taken for done.
  const fs::path marker = fs::path(save_dir) / kIncompleteMarker;
  if (rank0) {
    write_file_atomic(marker.string(),
                      "val did not finish here (stopped, killed or failed): the files in this "
                      "folder are partial. This file is removed when a validation finishes.\n");
  }
  try {
    if (single) {
      validate(a, a.weights[0], a.imgsz, save_dir, !a.noplots, ranks);
    } else if (a.task == "speed") {
      // val.py's speed benchmark: detection thresholds, no JSON, no plots.
      ValArgs s = a;
      s.conf_thres = 0.25, s.iou_thres = 0.45, s.save_json = false;
      for (const std::string& w : a.weights) validate(s, w, a.imgsz, save_dir, false, ranks);
    } else {
      run_study(a, save_dir, ranks);
    }
  } catch (...) {
    if (!rank0) throw;
    // A validation that failed before writing anything leaves no marker in an empty folder.
    std::error_code ec;
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(save_dir, ec)) files += e.path() != marker;
    if (files == 0) fs::remove(marker, ec);
    throw;
  }
  std::error_code ec;
  if (rank0) fs::remove(marker, ec);
  log_info("Results saved to " + one_line(save_dir));
  return 0;
}

}  // namespace

std::string study_row(const std::vector<double>& values) {
  std::string line;
  for (double v : values) line += (line.empty() ? "" : " ") + format_number("%10.4g", v);
  return line;
}

std::vector<int> study_sizes() {
  std::vector<int> x;
  for (int s = 256; s <= 1536; s += 128) x.push_back(s);
  return x;
}

int val_main(int argc, char** argv, const ValRanks& ranks) {
  const cli::Parsed<ValArgs> p = cli::parse(flags(), argc, argv, "val");
  if (p.help) {
    std::cout << cli::help_text(cli::specs_of(flags()),
                                "Validate YOLOv5 weights on a dataset (YOLOv5 v7.0 val.py flags)",
                                "val", version_help());
    return 0;
  }
  if (p.version) {
    std::cout << version_report();
    return 0;
  }
  const std::string bad = cli::first_bad_value(flags(), p.values);
  if (!bad.empty()) throw UsageError(bad);
  return run(p.values, ranks.exchange && ranks.exchange->size() > 1 ? ranks : ValRanks{});
}

}  // namespace yolo

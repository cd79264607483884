#include "utils/eval/validator.h"

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/dataset_config.h"
#include "utils/core/cpu_threads.h"
#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/core/progress.h"
#include "utils/core/runtime/grad_scaler.h"
#include "utils/core/stopwatch.h"
#include "utils/eval/boxes.h"
#include "utils/eval/coco_eval.h"
#include "utils/eval/nms.h"
#include "utils/eval/yolo_txt.h"
#include "utils/viz/plots.h"

namespace yolo {

namespace {

std::string row(const std::string& name, int images, int instances, double p, double r, double m50,
                double m) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%22s%11d%11d%11.3g%11.3g%11.3g%11.3g", name.c_str(), images,
                instances, p, r, m50, m);
  return buf;
}

std::string val_header() {
  char head[256];
  std::snprintf(head, sizeof(head), "%22s%11s%11s%11s%11s%11s%11s", "Class", "Images", "Instances",
                "P", "R", "mAP50", "mAP50-95");
  return head;
}

// Maps (n, 4+) xyxy boxes from letterboxed pixels back to the original image.
void to_original(at::Tensor& boxes, const ShapeInfo& s) {
  if (!s.valid) return;
  at::Tensor b = boxes.slice(1, 0, 4);
  scale_boxes(b, s.ratio_w, s.ratio_h, s.pad_w, s.pad_h, s.h0, s.w0);
}

// One pass of the validation loop: what it accumulates over the batches and the files it writes.
class Validation {
 public:
  Validation(const ValModel& model, const ValConfig& cfg, const DetectionLoss* loss,
             const torch::Device& device)
      : model_(model),
        cfg_(cfg),
        loss_(loss),
        device_(device),
        half_(cfg.half && device.is_cuda()),
        ultralytics_(cfg.protocol == ValProtocol::kUltralytics),
        cm_(model.nc) {
    nms_.conf_thres = cfg.conf_thres;
    nms_.iou_thres = cfg.iou_thres;
    nms_.max_det = cfg.max_det;
    nms_.multi_label = true;
    nms_.end2end = cfg.end2end;
    const std::filesystem::path dir(cfg.save_dir);
    if (cfg.save_json) {
      json_.open(dir / cfg.json_name);
      if (!json_) {
        throw std::runtime_error((dir / cfg.json_name).string() +
                                 ": cannot write the COCO JSON results; check that the folder is "
                                 "writable");
      }
      json_ << "[";
    }
    if (cfg.save_txt) std::filesystem::create_directories(dir / "labels");
  }

  void run(DataLoader& loader) {
    loader.start_next_epoch();
    std::optional<ProgressBar> bar;
    if (cfg_.progress) bar.emplace(static_cast<int64_t>(loader.num_batches()));
    for (int64_t b = 1;; ++b) {
      Stopwatch t0;
      std::optional<Batch> batch = loader.next();
      if (!batch) break;
      cpu_threads_tick();
      process(*batch, t0);
      if (bar) bar->update(b, val_header());
    }
    if (bar) bar->close(val_header());
    if (cfg_.save_json) json_ << "\n]\n";
  }

  ValResult finish() {
    const int nc = model_.nc;
    res_.ap = ap_per_class(tp_, conf_, pred_cls_, target_cls_,
                           ultralytics_ ? ApTail::kUltralytics : ApTail::kYolov5);
    res_.mp = res_.ap.mp;
    res_.mr = res_.ap.mr;
    res_.map50 = res_.ap.map50;
    res_.map = res_.ap.map;
    res_.nt.assign(nc, 0);
    for (int c : target_cls_) {
      if (c >= 0 && c < nc) ++res_.nt[c];
    }
    if (loss_sum_.defined()) {
      const at::Tensor sum = loss_sum_.to(torch::kCPU, torch::kDouble);
      for (int k = 0; k < 3; ++k) res_.loss[k] = sum[k].item<double>() / batches_;
    }
    res_.confusion = cm_.matrix();
    if (cfg_.plots && !res_.ap.classes.empty()) plot_metrics();
    if (res_.seen) {
      res_.ms_pre /= res_.seen;
      res_.ms_inf /= res_.seen;
      res_.ms_nms /= res_.seen;
    }
    return res_;
  }

 private:
  // The batch stays on the device from the images to NMS; the kept boxes come back in one copy,
  // and the labels (already on the host) are never read from the device.
  void process(const Batch& batch, const Stopwatch& t0) {
    const at::Tensor im = images_to_device(batch.images, device_);
    const int64_t h = im.size(2), w = im.size(3);
    res_.ms_pre += t0.milliseconds();
    Stopwatch t1;
    at::Tensor pred;
    {
      AutocastScope autocast(half_);  // YOLOv5's half=True; the CPU keeps float32
      ModelOutput out = model_.forward(im);
      pred = out.pred;
      if (loss_) {
        // The host rows, as in training: each loss moves what it needs without a read back.
        const at::Tensor items = (*loss_)(out.raw, batch.targets).items;
        loss_sum_ = loss_sum_.defined() ? loss_sum_ + items : items;
      }
    }
    res_.ms_inf += t1.milliseconds();
    ++batches_;
    Stopwatch t2;
    const BatchDetections dets = non_max_suppression_batched(pred, nms_, cfg_.nms_device_schedule);
    res_.ms_nms += t2.milliseconds();
    // Labels to letterboxed pixels.
    const at::Tensor targets = batch.targets.cpu();
    at::Tensor tl = targets.clone();
    tl.slice(1, 2, 6).mul_(torch::tensor({static_cast<float>(w), static_cast<float>(h),
                                          static_cast<float>(w), static_cast<float>(h)},
                                         tl.options()));
    if (cfg_.plots && batches_ <= 3) plot_batch(im, targets, dets, batch.paths);
    for (int64_t si = 0; si < im.size(0); ++si) {
      const at::Tensor labels = tl.index({tl.select(1, 0) == si}).slice(1, 1);  // cls, xywh
      score_image(labels, dets.image(si), batch.shapes[si],
                  std::filesystem::path(batch.paths[si]).stem().string());
    }
  }

  // Matches one image's predictions with its labels in original-image pixels.
  void score_image(const at::Tensor& labels, const at::Tensor& pred, const ShapeInfo& shape,
                   const std::string& stem) {
    ++res_.seen;
    const at::Tensor lcls = labels.slice(1, 0, 1).to(torch::kInt).contiguous();
    target_cls_.insert(target_cls_.end(), lcls.data_ptr<int>(),
                       lcls.data_ptr<int>() + lcls.numel());
    at::Tensor labelsn;
    if (labels.size(0)) {
      at::Tensor tbox = xywh2xyxy(labels.slice(1, 1, 5));
      if (!ultralytics_) to_original(tbox, shape);
      labelsn = torch::cat({labels.slice(1, 0, 1), tbox}, 1);
    }
    if (pred.size(0) == 0) {
      if (labels.size(0)) cm_.process_batch(at::Tensor(), labels.slice(1, 0, 1));
      return;
    }
    at::Tensor predn = pred.clone();
    to_original(predn, shape);
    const at::Tensor& matched = ultralytics_ ? pred : predn;
    const at::Tensor correct =
        labels.size(0)
            ? match_predictions(matched, labelsn, iouv_)
            : torch::zeros({pred.size(0), static_cast<int64_t>(iouv_.size())}, torch::kBool);
    if (labels.size(0)) cm_.process_batch(matched, labelsn);
    auto ca = correct.accessor<bool, 2>();
    const at::Tensor pf = pred.to(torch::kFloat).contiguous();
    auto pa = pf.accessor<float, 2>();  // one pass over the rows, no per-element tensors
    for (int64_t k = 0; k < pred.size(0); ++k) {
      std::vector<bool> row_flags(iouv_.size());
      for (size_t t = 0; t < iouv_.size(); ++t) row_flags[t] = ca[k][t];
      tp_.push_back(std::move(row_flags));
      conf_.push_back(pa[k][4]);
      pred_cls_.push_back(static_cast<int>(pa[k][5]));
    }
    if (cfg_.save_txt) {
      write_yolo_txt((std::filesystem::path(cfg_.save_dir) / "labels" / (stem + ".txt")).string(),
                     predn, shape.w0, shape.h0, cfg_.save_conf);
    }
    if (cfg_.save_json) write_json(predn, stem);
  }

  // YOLOv5's save_one_json: image_id from the file stem (a number when it is all digits), COCO's
  // category id on COCO data, the box as top-left x, y, width, height in original pixels.
  void write_json(const at::Tensor& predn, const std::string& stem) {
    const std::string image_id = coco_image_id_json(stem);
    const at::Tensor p = predn.to(torch::kFloat).contiguous();
    auto a = p.accessor<float, 2>();
    const auto& map91 = coco80_to_coco91();
    for (int64_t k = 0; k < p.size(0); ++k) {
      const int cls = static_cast<int>(a[k][5]);
      const int category = cfg_.coco91 && cls >= 0 && cls < static_cast<int>(map91.size())
                               ? map91[static_cast<size_t>(cls)]
                               : cls;
      char buf[512];  // the numbers; the image id (a file stem of any length) goes separately
      std::snprintf(buf, sizeof(buf),
                    ", \"category_id\": %d, \"bbox\": [%.3f, %.3f, %.3f, %.3f], \"score\": %.5f}",
                    category, a[k][0], a[k][1], a[k][2] - a[k][0], a[k][3] - a[k][1], a[k][4]);
      json_ << (first_json_ ? "" : ",") << "\n  {\"image_id\": " << image_id << buf;
      first_json_ = false;
    }
  }

  // val_batch{0,1,2}_labels.jpg and _pred.jpg.
  void plot_batch(const at::Tensor& im, const at::Tensor& targets, const BatchDetections& dets,
                  const std::vector<std::string>& paths) {
    const std::string stem =
        (std::filesystem::path(cfg_.save_dir) / ("val_batch" + std::to_string(batches_ - 1)))
            .string();
    plot_images(im, targets, paths, cfg_.names, stem + "_labels.jpg");
    std::vector<at::Tensor> rows;  // image, class, xywh (pixels), conf
    for (int64_t si = 0; si < im.size(0); ++si) {
      const at::Tensor p = dets.image(si).slice(0, 0, 30);  // YOLOv5 plots max_det 15-30 per image
      if (p.size(0) == 0) continue;
      rows.push_back(torch::cat({torch::full({p.size(0), 1}, static_cast<double>(si), p.options()),
                                 p.slice(1, 5, 6), xyxy2xywh(p.slice(1, 0, 4)), p.slice(1, 4, 5)},
                                1));
    }
    const at::Tensor pt = rows.empty() ? torch::zeros({0, 7}) : torch::cat(rows).cpu();
    plot_images(im, pt, paths, cfg_.names, stem + "_pred.jpg");
  }

  // PR, F1, P and R curves and the confusion matrix.
  void plot_metrics() const {
    const std::filesystem::path d(cfg_.save_dir);
    std::vector<std::string> present;
    std::vector<double> ap50;
    for (size_t k = 0; k < res_.ap.classes.size(); ++k) {
      present.push_back(class_name(cfg_.names, res_.ap.classes[k]));
      ap50.push_back(res_.ap.ap50(k));
    }
    const auto& ap = res_.ap;
    plot_pr_curve(ap.px, ap.pr_curve, ap50, present, (d / "PR_curve.png").string());
    plot_mc_curve(ap.px, ap.f1_curve, present, (d / "F1_curve.png").string(), "Confidence", "F1");
    plot_mc_curve(ap.px, ap.p_curve, present, (d / "P_curve.png").string(), "Confidence",
                  "Precision");
    plot_mc_curve(ap.px, ap.r_curve, present, (d / "R_curve.png").string(), "Confidence", "Recall");
    plot_confusion_matrix(res_.confusion, cfg_.names, (d / "confusion_matrix.png").string());
  }

  const ValModel& model_;
  const ValConfig& cfg_;
  const DetectionLoss* loss_;
  torch::Device device_;
  bool half_;
  bool ultralytics_;  // ValProtocol::kUltralytics
  const std::vector<double> iouv_ = iou_thresholds();
  NmsOptions nms_;
  ValResult res_;
  ConfusionMatrix cm_;
  std::vector<std::vector<bool>> tp_;
  std::vector<double> conf_;
  std::vector<int> pred_cls_, target_cls_;
  at::Tensor loss_sum_;  // box, obj, cls summed over the batches, on the device
  int batches_ = 0;
  std::ofstream json_;
  bool first_json_ = true;
};

}  // namespace

ValResult run_validation(DetectionModel& model, DataLoader& loader, const ValConfig& cfg,
                         const DetectionLoss* loss, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const ValModel vm{[&model](const at::Tensor& im) { return model->forward(im); }, model->nc()};
  ValResult res = run_validation(vm, loader, cfg, loss, device);
  if (was_training) model->train();
  return res;
}

ValResult run_validation(const ValModel& model, DataLoader& loader, const ValConfig& cfg,
                         const DetectionLoss* loss, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  Validation v(model, cfg, loss, device);
  v.run(loader);
  return v.finish();
}

bool is_coco_dataset(const DatasetConfig& dc) {
  if (dc.val.size() != 1) return false;
  const std::filesystem::path v(dc.val.front());
  return v.filename() == "val2017.txt" && v.parent_path().filename() == "coco";
}

double final_validation_iou(const DatasetConfig& dc, const ModelFamily& family) {
  return is_coco_dataset(dc) ? family.val_iou_coco : family.val_iou;
}

void evaluate_coco_json(const std::string& json, const DatasetConfig& dc,
                        const std::vector<std::string>& images, ValResult& res) {
  const std::filesystem::path anno =
      std::filesystem::path(dc.root) / "annotations" / "instances_val2017.json";
  if (!std::filesystem::exists(anno)) {
    log_info("Saved " + json + "; no COCO evaluation: " + anno.string() +
             " does not exist (scripts/yolo_to_coco.py writes one from YOLO labels)");
    return;
  }
  log_info("Evaluating COCO mAP of " + json + " against " + anno.string() + "...");
  const CocoGroundTruth gt = load_coco_ground_truth(anno.string());
  std::vector<std::string> ids;
  for (const std::string& f : images) ids.push_back(std::filesystem::path(f).stem().string());
  const CocoStats stats = coco_evaluate(gt, load_coco_results(json), ids);
  log_info(stats.summary());
  res.map = stats.map();
  res.map50 = stats.map50();
}

std::string format_val_table(const ValResult& r, const std::vector<std::string>& names,
                             bool per_class, bool header) {
  std::ostringstream s;
  if (header) s << val_header() << "\n";
  int total = 0;
  for (int n : r.nt) total += n;
  s << row("all", r.seen, total, r.mp, r.mr, r.map50, r.map);
  if (total == 0) s << "\nWARNING: no labels found in the val set, can not compute metrics";
  if (per_class) {
    for (size_t k = 0; k < r.ap.classes.size(); ++k) {
      const int c = r.ap.classes[k];
      s << "\n"
        << row(one_line(class_name(names, c)), r.seen, r.nt.at(c), r.ap.p[k], r.ap.r[k],
               r.ap.ap50(k), r.ap.ap_mean(k));
    }
  }
  return s.str();
}

}  // namespace yolo

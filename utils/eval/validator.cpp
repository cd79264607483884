#include "utils/eval/validator.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/dataset_config.h"
#include "utils/core/byte_codec.h"
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
        ranks_(cfg.ranks && cfg.ranks->size() > 1 ? cfg.ranks : nullptr),
        rank0_(!ranks_ || ranks_->rank() == 0),
        cm_(model.nc) {
    nms_.conf_thres = cfg.conf_thres;
    nms_.iou_thres = cfg.iou_thres;
    nms_.max_det = cfg.max_det;
    nms_.multi_label = true;
    nms_.end2end = cfg.end2end;
    const std::filesystem::path dir(cfg.save_dir);
    if (cfg.save_json && rank0_) {
      json_.open(dir / cfg.json_name);
      if (!json_) {
        throw std::runtime_error((dir / cfg.json_name).string() +
                                 ": cannot write the COCO JSON results; check that the folder is "
                                 "writable");
      }
    }
    if (cfg.save_txt) std::filesystem::create_directories(dir / "labels");
  }

  void run(DataLoader& loader) {
    first_batch_ = ranks_ ? loader.first_batch() : 0;
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
  }

  ValResult finish() {
    // Box, obj, cls summed over the batches in order, in the loss's own type (what one process
    // summing on its device gets, bit for bit, whichever rank ran a batch).
    at::Tensor loss_rows =
        loss_items_.empty() ? at::Tensor() : torch::stack(loss_items_).to(torch::kCPU);
    if (ranks_ && !join_ranks(loss_rows)) return res_;  // not rank 0: its headline metrics
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
    if (loss_rows.defined() && loss_rows.size(0) > 0) {
      at::Tensor sum = loss_rows[0].clone();
      for (int64_t b = 1; b < loss_rows.size(0); ++b) sum.add_(loss_rows[b]);
      const at::Tensor s64 = sum.to(torch::kDouble);
      for (int k = 0; k < 3; ++k) res_.loss[k] = s64[k].item<double>() / batches_;
    }
    if (res_.confusion.empty()) res_.confusion = cm_.matrix();
    if (cfg_.plots && !res_.ap.classes.empty()) plot_metrics();
    if (res_.seen) {
      res_.ms_pre /= res_.seen;
      res_.ms_inf /= res_.seen;
      res_.ms_nms /= res_.seen;
    }
    if (ranks_) share_headline();
    if (cfg_.save_json) {
      json_ << "[" << json_body_ << "\n]\n";
      json_.flush();
      if (!json_) {
        throw std::runtime_error((std::filesystem::path(cfg_.save_dir) / cfg_.json_name).string() +
                                 ": writing the COCO JSON results failed (disk full?)");
      }
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
        loss_items_.push_back((*loss_)(out.raw, batch.targets).items);
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
    if (cfg_.plots && first_batch_ + batches_ <= 3) plot_batch(im, targets, dets, batch.paths);
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
      json_body_ +=
          (json_body_.empty() ? "\n  {\"image_id\": " : ",\n  {\"image_id\": ") + image_id + buf;
    }
  }

  // val_batch{0,1,2}_labels.jpg and _pred.jpg (by the batch's index among all ranks' batches;
  // another rank's go to rank 0 as bytes).
  void plot_batch(const at::Tensor& im, const at::Tensor& targets, const BatchDetections& dets,
                  const std::vector<std::string>& paths) {
    const std::string name = "val_batch" + std::to_string(first_batch_ + batches_ - 1);
    const std::filesystem::path dir =
        rank0_ ? std::filesystem::path(cfg_.save_dir) : std::filesystem::temp_directory_path();
    const std::string stem =
        (dir / (rank0_ ? name : name + "." + std::to_string(::getpid()))).string();
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
    if (rank0_) return;
    for (const char* kind : {"_labels.jpg", "_pred.jpg"}) {
      std::ifstream in(stem + kind, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      plots_.emplace_back(name + kind, std::move(bytes));
      std::filesystem::remove(stem + kind);
    }
  }

  // Every rank's statistics to rank 0, joined there in rank order (the ranks hold consecutive
  // batches): true on rank 0, which then goes on as one process with every batch would.
  bool join_ranks(at::Tensor& loss_rows) {
    const size_t niou = iouv_.size();
    ByteWriter w;
    w.pod<int32_t>(res_.seen);
    w.pod<int32_t>(batches_);
    for (double t : {res_.ms_pre, res_.ms_inf, res_.ms_nms}) w.pod<double>(t);
    std::vector<uint8_t> tp;
    tp.reserve(tp_.size() * niou);
    for (const auto& r : tp_) tp.insert(tp.end(), r.begin(), r.end());
    w.vec(tp);
    w.vec(conf_);
    w.vec(pred_cls_);
    w.vec(target_cls_);
    std::vector<double> cm;
    for (const auto& r : cm_.matrix()) cm.insert(cm.end(), r.begin(), r.end());
    w.vec(cm);
    const at::Tensor lr = loss_rows.defined() ? loss_rows.to(torch::kFloat).contiguous()
                                              : torch::zeros({0, 3}, torch::kFloat);
    w.vec(std::vector<float>(lr.data_ptr<float>(), lr.data_ptr<float>() + lr.numel()));
    w.str(json_body_);
    w.pod<uint64_t>(plots_.size());
    for (const auto& [name, bytes] : plots_) {
      w.str(name);
      w.str(bytes);
    }
    const std::vector<std::string> parts =
        ranks_->gather_to_rank0("its share of validation", w.bytes());
    if (!rank0_) {
      share_headline();
      return false;
    }
    // Rank 0's own part is already in place; the others follow in rank order.
    res_.confusion = cm_.matrix();
    std::vector<at::Tensor> loss_parts;
    if (loss_rows.defined()) loss_parts.push_back(loss_rows);
    for (size_t r = 1; r < parts.size(); ++r) {
      ByteReader in(parts[r]);
      int32_t seen = 0, batches = 0;
      double ms[3];
      std::vector<float> losses;
      std::string json;
      uint64_t nplots = 0;
      std::vector<double> conf;
      std::vector<int> pred_cls, target_cls;
      bool ok = in.pod(seen) && in.pod(batches) && in.pod(ms[0]) && in.pod(ms[1]) &&
                in.pod(ms[2]) && in.vec(tp) && in.vec(conf) && in.vec(pred_cls) &&
                in.vec(target_cls) && in.vec(cm) && in.vec(losses) && in.str(json) &&
                in.pod(nplots);
      for (uint64_t k = 0; ok && k < nplots; ++k) {
        std::string name, bytes;
        ok = in.str(name) && in.str(bytes);
        if (ok) write_plot(name, bytes);
      }
      const size_t side = res_.confusion.size();
      if (!ok || !in.at_end() || tp.size() != conf.size() * niou || cm.size() != side * side ||
          losses.size() % 3 != 0) {
        throw std::runtime_error("validation: rank " + std::to_string(r) +
                                 "'s statistics arrived damaged");
      }
      res_.seen += seen;
      batches_ += batches;
      res_.ms_pre += ms[0], res_.ms_inf += ms[1], res_.ms_nms += ms[2];
      for (size_t k = 0; k < conf.size(); ++k) {
        tp_.emplace_back(tp.begin() + static_cast<std::ptrdiff_t>(k * niou),
                         tp.begin() + static_cast<std::ptrdiff_t>((k + 1) * niou));
      }
      conf_.insert(conf_.end(), conf.begin(), conf.end());
      pred_cls_.insert(pred_cls_.end(), pred_cls.begin(), pred_cls.end());
      target_cls_.insert(target_cls_.end(), target_cls.begin(), target_cls.end());
      for (size_t i = 0; i < side; ++i) {
        for (size_t j = 0; j < side; ++j) res_.confusion[i][j] += cm[i * side + j];
      }
      if (!losses.empty()) {
        const auto n = static_cast<int64_t>(losses.size() / 3);
        const at::Tensor rows = torch::from_blob(losses.data(), {n, 3}, torch::kFloat).clone();
        loss_parts.push_back(loss_rows.defined() ? rows.to(loss_rows.scalar_type()) : rows);
      }
      if (!json.empty()) json_body_ += (json_body_.empty() ? "" : ",") + json;
    }
    if (!loss_parts.empty()) loss_rows = torch::cat(loss_parts);
    return true;
  }

  void write_plot(const std::string& name, const std::string& bytes) const {
    const std::filesystem::path path = std::filesystem::path(cfg_.save_dir) / name;
    std::ofstream out(path, std::ios::binary);
    out << bytes;
    if (!out) log_warn("validation: cannot write " + path.string());
  }

  // Rank 0's headline metrics to the other ranks, so that every rank decides alike (fitness,
  // early stopping). Numbers as text with 17 digits: exact.
  void share_headline() {
    std::string text;
    if (rank0_) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.17g %.17g %.17g %.17g %.17g %.17g %.17g %d", res_.mp,
                    res_.mr, res_.map50, res_.map, res_.loss[0], res_.loss[1], res_.loss[2],
                    res_.seen);
      text = buf;
    }
    text = ranks_->broadcast_from_rank0("validation's metrics", text);
    if (rank0_) return;
    std::istringstream in(text);
    in >> res_.mp >> res_.mr >> res_.map50 >> res_.map >> res_.loss[0] >> res_.loss[1] >>
        res_.loss[2] >> res_.seen;
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
  bool ultralytics_;           // ValProtocol::kUltralytics
  const RankExchange* ranks_;  // null in one process
  bool rank0_;
  const std::vector<double> iouv_ = iou_thresholds();
  NmsOptions nms_;
  ValResult res_;
  ConfusionMatrix cm_;
  std::vector<std::vector<bool>> tp_;
  std::vector<double> conf_;
  std::vector<int> pred_cls_, target_cls_;
  std::vector<at::Tensor> loss_items_;  // box, obj, cls per batch, on the device
  int batches_ = 0;
  int64_t first_batch_ = 0;  // this rank's first batch among all ranks' batches
  std::ofstream json_;       // rank 0's
  std::string json_body_;    // the results' entries, comma-separated
  std::vector<std::pair<std::string, std::string>> plots_;  // another rank's val_batch plots
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

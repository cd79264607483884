#include "apps/val/validator.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "utils/boxes.h"
#include "utils/log.h"
#include "utils/nms.h"
#include "utils/plots.h"

namespace yolo {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string row(const std::string& name, int images, int instances, double p, double r, double m50,
                double m) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%22s%11d%11d%11.3g%11.3g%11.3g%11.3g", name.c_str(), images,
                instances, p, r, m50, m);
  return buf;
}

// Maps (n, 4+) xyxy boxes from letterboxed pixels back to the original image.
void to_original(at::Tensor& boxes, const ShapeInfo& s) {
  if (!s.valid) return;
  boxes.select(1, 0).sub_(s.pad_w).div_(s.ratio_w);
  boxes.select(1, 2).sub_(s.pad_w).div_(s.ratio_w);
  boxes.select(1, 1).sub_(s.pad_h).div_(s.ratio_h);
  boxes.select(1, 3).sub_(s.pad_h).div_(s.ratio_h);
  at::Tensor b = boxes.slice(1, 0, 4);
  clip_boxes(b, s.h0, s.w0);
}
}  // namespace

ValResult run_validation(DetectionModel& model, DataLoader& loader, const ValConfig& cfg,
                         const ComputeLoss* loss, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int nc = model->nc();
  const std::vector<double> iouv = iou_thresholds();
  ValResult res;
  ConfusionMatrix cm(nc);
  std::vector<std::vector<bool>> tp;
  std::vector<double> conf;
  std::vector<int> pred_cls, target_cls;
  at::Tensor loss_sum = torch::zeros({3});
  int batches = 0;
  NmsOptions nms_opt;
  nms_opt.conf_thres = cfg.conf_thres;
  nms_opt.iou_thres = cfg.iou_thres;
  nms_opt.max_det = cfg.max_det;
  nms_opt.multi_label = true;
  std::ofstream json;
  bool first_json = true;
  if (cfg.save_json) {
    json.open(std::filesystem::path(cfg.save_dir) / "predictions.json");
    json << "[";
  }
  if (cfg.save_txt)
    std::filesystem::create_directories(std::filesystem::path(cfg.save_dir) / "labels");

  loader.start_epoch(0);
  while (true) {
    auto t0 = Clock::now();
    std::optional<Batch> batch = loader.next();
    if (!batch) break;
    at::Tensor im = batch->images.to(device, /*non_blocking=*/true);
    at::Tensor targets = batch->targets.to(device);
    const int64_t bs = im.size(0), h = im.size(2), w = im.size(3);
    res.ms_pre += ms_since(t0);
    auto t1 = Clock::now();
    ModelOutput out = model->forward(im);
    res.ms_inf += ms_since(t1);
    if (loss) loss_sum += (*loss)(out.raw, targets).items.cpu();
    ++batches;
    // Labels to letterboxed pixels.
    at::Tensor tl = targets.clone();
    tl.slice(1, 2, 6).mul_(torch::tensor({static_cast<float>(w), static_cast<float>(h),
                                          static_cast<float>(w), static_cast<float>(h)},
                                         tl.options()));
    auto t2 = Clock::now();
    const std::vector<at::Tensor> preds = non_max_suppression(out.pred, nms_opt);
    res.ms_nms += ms_since(t2);
    if (cfg.plots && batches <= 3) {
      const std::string stem =
          (std::filesystem::path(cfg.save_dir) / ("val_batch" + std::to_string(batches - 1)))
              .string();
      plot_images(im, targets, batch->paths, cfg.names, stem + "_labels.jpg");
      std::vector<at::Tensor> rows;  // image, class, xywh (pixels), conf
      for (int64_t si = 0; si < bs; ++si) {
        const at::Tensor p = preds[si].slice(0, 0, 30);  // YOLOv5 plots max_det 15-30 per image
        if (p.size(0) == 0) continue;
        rows.push_back(
            torch::cat({torch::full({p.size(0), 1}, static_cast<double>(si), p.options()),
                        p.slice(1, 5, 6), xyxy2xywh(p.slice(1, 0, 4)), p.slice(1, 4, 5)},
                       1));
      }
      const at::Tensor pt = rows.empty() ? torch::zeros({0, 7}) : torch::cat(rows).cpu();
      plot_images(im, pt, batch->paths, cfg.names, stem + "_pred.jpg");
    }

    for (int64_t si = 0; si < bs; ++si) {
      const at::Tensor labels = tl.index({tl.select(1, 0) == si}).slice(1, 1).cpu();  // cls, xywh
      const at::Tensor pred = preds[si].cpu();
      const ShapeInfo& shape = batch->shapes[si];
      ++res.seen;
      const at::Tensor lcls = labels.slice(1, 0, 1).to(torch::kInt).contiguous();
      target_cls.insert(target_cls.end(), lcls.data_ptr<int>(),
                        lcls.data_ptr<int>() + lcls.numel());
      at::Tensor labelsn;
      if (labels.size(0)) {
        at::Tensor tbox = xywh2xyxy(labels.slice(1, 1, 5));
        to_original(tbox, shape);
        labelsn = torch::cat({labels.slice(1, 0, 1), tbox}, 1);
      }
      if (pred.size(0) == 0) {
        if (labels.size(0)) cm.process_batch(at::Tensor(), labels.slice(1, 0, 1));
        continue;
      }
      at::Tensor predn = pred.clone();
      to_original(predn, shape);
      at::Tensor correct =
          labels.size(0)
              ? match_predictions(predn, labelsn, iouv)
              : torch::zeros({pred.size(0), static_cast<int64_t>(iouv.size())}, torch::kBool);
      if (labels.size(0)) cm.process_batch(predn, labelsn);
      auto ca = correct.accessor<bool, 2>();
      const at::Tensor pf = pred.to(torch::kFloat).contiguous();
      auto pa = pf.accessor<float, 2>();  // one pass over the rows, no per-element tensors
      for (int64_t k = 0; k < pred.size(0); ++k) {
        std::vector<bool> row_flags(iouv.size());
        for (size_t t = 0; t < iouv.size(); ++t) row_flags[t] = ca[k][t];
        tp.push_back(std::move(row_flags));
        conf.push_back(pa[k][4]);
        pred_cls.push_back(static_cast<int>(pa[k][5]));
      }
      const std::string stem = std::filesystem::path(batch->paths[si]).stem().string();
      if (cfg.save_txt) {
        std::ofstream f(std::filesystem::path(cfg.save_dir) / "labels" / (stem + ".txt"));
        const at::Tensor xywh = xyxy2xywh(predn.slice(1, 0, 4));
        for (int64_t k = 0; k < predn.size(0); ++k) {
          f << predn[k][5].item<int>() << " " << xywh[k][0].item<float>() / shape.w0 << " "
            << xywh[k][1].item<float>() / shape.h0 << " " << xywh[k][2].item<float>() / shape.w0
            << " " << xywh[k][3].item<float>() / shape.h0;
          if (cfg.save_conf) f << " " << predn[k][4].item<float>();
          f << "\n";
        }
      }
      if (cfg.save_json) {
        for (int64_t k = 0; k < predn.size(0); ++k) {
          const float x1 = predn[k][0].item<float>(), y1 = predn[k][1].item<float>();
          json << (first_json ? "" : ",") << "\n  {\"image_id\": \"" << stem
               << "\", \"category_id\": " << predn[k][5].item<int>() << ", \"bbox\": [" << x1
               << ", " << y1 << ", " << predn[k][2].item<float>() - x1 << ", "
               << predn[k][3].item<float>() - y1 << "], \"score\": " << predn[k][4].item<float>()
               << "}";
          first_json = false;
        }
      }
    }
  }
  if (cfg.save_json) json << "\n]\n";

  res.ap = ap_per_class(tp, conf, pred_cls, target_cls);
  res.mp = res.ap.mp;
  res.mr = res.ap.mr;
  res.map50 = res.ap.map50;
  res.map = res.ap.map;
  res.nt.assign(nc, 0);
  for (int c : target_cls) {
    if (c >= 0 && c < nc) ++res.nt[c];
  }
  if (batches) {
    for (int k = 0; k < 3; ++k) res.loss[k] = loss_sum[k].item<double>() / batches;
  }
  res.confusion = cm.matrix();
  if (cfg.plots && !res.ap.classes.empty()) {
    const std::filesystem::path d(cfg.save_dir);
    std::vector<std::string> present;
    std::vector<double> ap50;
    for (size_t k = 0; k < res.ap.classes.size(); ++k) {
      const int c = res.ap.classes[k];
      present.push_back(c < static_cast<int>(cfg.names.size()) ? cfg.names[c] : std::to_string(c));
      ap50.push_back(res.ap.ap50(k));
    }
    plot_pr_curve(res.ap.px, res.ap.pr_curve, ap50, present, (d / "PR_curve.png").string());
    plot_mc_curve(res.ap.px, res.ap.f1_curve, present, (d / "F1_curve.png").string(), "Confidence",
                  "F1");
    plot_mc_curve(res.ap.px, res.ap.p_curve, present, (d / "P_curve.png").string(), "Confidence",
                  "Precision");
    plot_mc_curve(res.ap.px, res.ap.r_curve, present, (d / "R_curve.png").string(), "Confidence",
                  "Recall");
    plot_confusion_matrix(res.confusion, cfg.names, (d / "confusion_matrix.png").string());
  }
  if (res.seen) {
    res.ms_pre /= res.seen;
    res.ms_inf /= res.seen;
    res.ms_nms /= res.seen;
  }
  if (was_training) model->train();
  return res;
}

std::string format_val_table(const ValResult& r, const std::vector<std::string>& names,
                             bool per_class) {
  std::ostringstream s;
  char head[256];
  std::snprintf(head, sizeof(head), "%22s%11s%11s%11s%11s%11s%11s", "Class", "Images", "Instances",
                "P", "R", "mAP50", "mAP50-95");
  s << head << "\n";
  int total = 0;
  for (int n : r.nt) total += n;
  s << row("all", r.seen, total, r.mp, r.mr, r.map50, r.map);
  if (total == 0) s << "\nWARNING: no labels found in the val set, can not compute metrics";
  if (per_class) {
    for (size_t k = 0; k < r.ap.classes.size(); ++k) {
      const int c = r.ap.classes[k];
      const std::string name = c < static_cast<int>(names.size()) ? names[c] : std::to_string(c);
      s << "\n"
        << row(name, r.seen, r.nt.at(c), r.ap.p[k], r.ap.r[k], r.ap.ap50(k), r.ap.ap_mean(k));
    }
  }
  return s.str();
}

}  // namespace yolo

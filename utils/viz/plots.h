#pragma once
// Training plots as YOLOv5 v7.0 draws them (utils/plots.py, utils/metrics.py), rendered with
// OpenCV instead of matplotlib: labels.jpg, train/val batch mosaics, results.png, the PR / F1 / P /
// R curves and the confusion matrix. Every function takes the full output file path, creates its
// parent folder and throws std::runtime_error naming the path when the file cannot be written;
// bad inputs throw std::invalid_argument naming the plot.
#include <ATen/core/Tensor.h>

#include <array>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "utils/core/io/results_csv.h"

namespace yolo {

// YOLOv5's 20-colour class palette (utils/plots.py Colors), as BGR.
cv::Scalar class_color(int cls);

// labels.jpg (1600x1600): instances per class, box outlines centred in a square (first 1000),
// 2D histograms of box centres (x, y) and sizes (width, height). Rows are {cls, cx, cy, w, h},
// coordinates normalised to 0..1. `names` may be empty (class ids are shown).
void plot_labels(const std::vector<std::array<float, 5>>& labels,
                 const std::vector<std::string>& names, const std::string& path);

// One box for plot_images: centre/size normalised (0..1) or in pixels of the input images.
struct PlotTarget {
  int image = 0;  // index into the batch
  int cls = 0;
  float cx = 0, cy = 0, w = 0, h = 0;
  float conf = -1;  // < 0: a ground-truth label; else a prediction, drawn when conf > 0.25
};

// Batch mosaic (train_batch0.jpg, val_batch0_labels.jpg, val_batch0_pred.jpg): up to
// `max_subplots` images in a square grid filled column by column, scaled to at most 1920 px,
// white tile borders, file names (`paths`, may be empty) and boxes coloured per class with
// "name" or "name conf" tags. As YOLOv5, an image's boxes count as normalised when all their
// corners are <= 1.01. `images` are BGR CV_8UC3, all the same size.
void plot_images(const std::vector<cv::Mat>& images, const std::vector<PlotTarget>& targets,
                 const std::vector<std::string>& paths, const std::vector<std::string>& names,
                 const std::string& path, int max_subplots = 16);

// Tensor form, as the trainer holds a batch: `images` (bs, 3, h, w) RGB of any dtype/device,
// 0..1 (scaled by 255 when the first image's max is <= 1) or 0..255; `targets` (n, 6)
// {image, cls, cx, cy, w, h} for labels or (n, 7) with conf last for predictions (may be empty).
void plot_images(const at::Tensor& images, const at::Tensor& targets,
                 const std::vector<std::string>& paths, const std::vector<std::string>& names,
                 const std::string& path, int max_subplots = 16);

// results.png (2400x1200): 10 panels vs epoch, in YOLOv5's order: train box/obj/cls loss,
// precision, recall, val box/obj/cls loss, mAP@0.5, mAP@0.5:0.95; each with the values (dots and
// line) and a dotted Gaussian-smoothed line (sigma 3). Needs YOLOv5's first 11 columns.
void plot_results(const std::string& csv_path, const std::string& png_path);

// PR_curve.png: `py[i]` is class i's precision at the recall points `px` (all the same length),
// `ap50[i]` its AP@0.5 and `names[i]` its name. A legend per class when 0 < names < 21, else
// thin grey lines; the class mean is thick blue with "all classes X.XXX mAP@0.5".
void plot_pr_curve(const std::vector<double>& px, const std::vector<std::vector<double>>& py,
                   const std::vector<double>& ap50, const std::vector<std::string>& names,
                   const std::string& path);

// F1_curve.png, P_curve.png, R_curve.png: metric vs confidence per class; the class mean, box
// smoothed (fraction 0.05), is thick blue with "all classes 0.62 at 0.412" (max and its x).
void plot_mc_curve(const std::vector<double>& px, const std::vector<std::vector<double>>& curves,
                   const std::vector<std::string>& names, const std::string& path,
                   const std::string& xlabel = "Confidence", const std::string& ylabel = "Metric");

// confusion_matrix.png: `matrix` (nc+1)x(nc+1), rows predicted, columns true, last = background
// (ConfusionMatrix::matrix()). Columns normalised when `normalize`; cells < 0.005 blank; values
// written when nc < 30; class names + "background" on the axes when names.size() == nc < 99.
void plot_confusion_matrix(const std::vector<std::vector<double>>& matrix,
                           const std::vector<std::string>& names, const std::string& path,
                           bool normalize = true);

// YOLOv5's plot_evolve: one panel per hyperparameter of an evolve.csv (7 result columns, then the
// hyperparameters), each generation's value against its fitness, the best one marked.
void plot_evolve(const std::string& csv_path, const std::string& png_path);

// YOLOv5's plot_val_study: for each study_*.txt (val --task study; rows per image size `x`, columns
// P, R, mAP50, mAP50-95, 3 losses, pre-process, inference and NMS ms), COCO-style AP (mAP50-95 x
// 100) against inference ms per image, up to the size with the best mAP, one line per file.
void plot_val_study(const std::vector<std::string>& files, const std::vector<int>& x,
                    const std::string& png_path);

}  // namespace yolo

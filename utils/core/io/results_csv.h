#pragma once
// YOLOv5's results.csv and evolve.csv: a header of column names, then one row per epoch (or
// generation), every cell right-aligned in 20 characters ("%20s", "%20.5g"). Read back by name.
#include <array>
#include <string>
#include <vector>

namespace yolo {

// The three loss terms' names: YOLOv5's box_loss, obj_loss, cls_loss, or an anchor-free model's
// box_loss, cls_loss, dfl_loss (Ultralytics' names).
using LossNames = std::array<std::string, 3>;
inline const LossNames kYolov5LossNames = {"box_loss", "obj_loss", "cls_loss"};

// results.csv's columns in YOLOv5 v7.0's order: epoch, the train/ losses, then the validation
// metrics below, then x/lr0..x/lr2.
std::vector<std::string> results_csv_columns(const LossNames& losses = kYolov5LossNames);
// The validation columns: metrics/precision, metrics/recall, metrics/mAP_0.5,
// metrics/mAP_0.5:0.95, then the val/ losses (evolve.csv starts with them).
std::vector<std::string> val_metric_columns(const LossNames& losses = kYolov5LossNames);

// Appends one row of `values` (one per column) to `path`, writing the header first when the file
// does not exist yet. Throws std::runtime_error naming the file when it cannot be written.
void append_csv_row(const std::string& path, const std::vector<std::string>& columns,
                    const std::vector<double>& values);

// A results or evolve CSV: trimmed column names and one row of values per line ("nan"/"inf"
// allowed).
struct ResultsTable {
  std::string path;
  std::vector<std::string> columns;
  std::vector<std::vector<double>> rows;
  // The index of column `name`; throws std::runtime_error naming the file when it is missing.
  size_t column(const std::string& name) const;
  // Every row's value in column `name`.
  std::vector<double> values(const std::string& name) const;
};
// Throws std::runtime_error naming the file and line for a missing file, a row whose value count
// differs from the header's or a value that is not a number.
ResultsTable read_results_csv(const std::string& csv_path);

}  // namespace yolo

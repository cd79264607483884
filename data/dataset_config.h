#pragma once
// Dataset YAML (YOLOv5 v7.0 schema): path, train, val, test, names, nc, download, plus our
// `generate: shapes` marker for the built-in synthetic dataset.
#include <functional>
#include <string>
#include <vector>

#include "data/download.h"

namespace yolo {

struct DatasetConfig {
  std::string yaml_path;                      // the file it came from (for messages)
  std::string root;                           // `path`, made absolute
  std::vector<std::string> train, val, test;  // absolute sources (folders or .txt lists)
  std::vector<std::string> names;             // index = class id
  int nc = 0;
  std::string download;  // as written in the YAML (its URLs, one per line, for a list)
  // The archives `download:` names: one URL (unpacked beside `root`, as YOLOv5's zips hold the
  // dataset's folder), or a list of URLs and {url, dir} maps (`dir` relative to `root`). Empty for
  // anything else (a script), which is never run.
  std::vector<DatasetDownload> downloads;
  std::string generate;  // "shapes" or empty

  // Sources of "train", "val" or "test"; throws std::runtime_error for another name.
  const std::vector<std::string>& split(const std::string& name) const;
};

// Parses and resolves a dataset YAML. A relative `path` resolves to the first existing of: the
// YAML's folder, the working dir, the project root (YOLOv5's rule); when none exists yet (data to
// generate or download), the YAML's folder. No `path`: the YAML's folder. train/val/test resolve
// against `path`.
// Throws std::runtime_error naming the file, line and key on a missing or malformed entry, or an
// `nc` that disagrees with `names`. Does not check that the data exists (see ensure_dataset).
DatasetConfig load_dataset_config(const std::string& yaml_path);

// Makes sure the val (and train) sources exist: generates the shapes dataset for
// `generate: shapes`, or downloads and unpacks `download:`'s archives. Only rank 0
// fetches; every rank calls `barrier` exactly once. Throws naming what is missing and how to get
// it.
void ensure_dataset(const DatasetConfig& cfg, bool is_rank0 = true,
                    const std::function<void()>& barrier = {});

}  // namespace yolo

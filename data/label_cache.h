#pragma once
// Checked labels and image sizes for one split, cached in a binary file next to the labels
// (labels/<split>.cache) so the images are decoded and checked only once.
#include <cstdint>
#include <string>
#include <vector>

#include "data/labels.h"
#include "utils/core/rank_exchange.h"

namespace yolo {

struct LabelRecord {
  std::string image;
  int height = 0, width = 0;  // original size
  Labels labels;
};

struct LabelScan {
  std::vector<LabelRecord> records;  // usable images only, in input order
  int found = 0, missing = 0, empty = 0, corrupt = 0;
  std::vector<std::string> messages;  // warnings (corrupt files, duplicates removed)
  uint64_t hash = 0;
  bool from_cache = false;
};

// True when `dir` is a folder we may write to: writable by access(2) and not marked read-only
// (no write bit at all), so a read-only dataset stays untouched even when running as root.
bool folder_writable(const std::string& dir);

// Hash of the image and label paths, their sizes and mtimes, and nc: a cache is stale when any
// of them changes.
uint64_t label_files_hash(const std::vector<std::string>& images, int nc);

// Checks every image/label pair with `threads` threads (0 = hardware threads).
LabelScan scan_labels(const std::vector<std::string>& images, int nc, int threads = 0);

// Serialises a scan (cache format v2); load returns false when the file is missing, malformed,
// of another version, or its hash differs from `expected_hash`.
std::string encode_label_cache(const LabelScan& scan);
bool decode_label_cache(const std::string& bytes, uint64_t expected_hash, LabelScan& out);

// Labels for `images`: read from `cache_path` when fresh, else scanned and written there
// atomically (a read-only folder only warns). With several processes (`ranks`, a collective: every
// rank calls it), rank 0 decides whether its cache is fresh; if not, each rank checks its
// contiguous share of the images with `threads` threads and rank 0 joins the shares in order,
// writes the cache (the same bytes one process writes) and hands the scan to the others. Rank 0
// prints the warnings and the found/missing/empty/corrupt totals. Throws std::runtime_error naming
// the cache when no usable image remains.
LabelScan load_labels(const std::vector<std::string>& images, const std::string& cache_path, int nc,
                      const RankExchange* ranks = nullptr, int threads = 0);

}  // namespace yolo

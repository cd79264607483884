#pragma once
// Image discovery and the images -> labels path rule (YOLOv5 v7.0 LoadImagesAndLabels).
#include <string>
#include <vector>

namespace yolo {

// True when the file extension (case-insensitive) is an image format we decode:
// bmp, jpeg, jpg, png, tif, tiff, webp, pfm.
bool is_image_file(const std::string& path);

// Image files from split sources: each a folder (searched recursively), or a .txt file listing
// one image path per line ("./x" lines are relative to the list's folder, other relative lines to
// the working dir as in YOLOv5). Non-image entries are dropped; the result is sorted.
// Throws std::runtime_error naming a missing source, or when no image is found.
std::vector<std::string> list_image_files(const std::vector<std::string>& sources);

// The last "/images/" becomes "/labels/" and the extension becomes ".txt".
std::string image_to_label_path(const std::string& image_path);

// Where the label cache of a split lives: next to a .txt list source (same stem), else the folder
// of the first label file with ".cache" appended (labels/train2017.cache), as YOLOv5.
std::string label_cache_path(const std::vector<std::string>& sources,
                             const std::vector<std::string>& image_files);

// Where a cache file at `path` (beside the data) goes instead when caches have a folder of their
// own (`cache_dir`, "" for none): cache_dir/<hash of path's folder>-<file name>, so a read-only
// dataset can be cached and two datasets never share a file.
std::string cache_file_in(const std::string& path, const std::string& cache_dir);

// The cache folder in force: `flag_value` (--cache-dir) when given, else $YOLO_CACHE_DIR, else ""
// (caches beside the data). A folder that cannot be made is a UsageError naming where it came
// from.
std::string resolve_cache_dir(const std::string& flag_value);

}  // namespace yolo

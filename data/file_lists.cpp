#include "data/file_lists.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "utils/core/errors.h"

namespace fs = std::filesystem;

namespace yolo {

bool is_image_file(const std::string& path) {
  const auto dot = path.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  static const char* kFormats[] = {"bmp", "jpeg", "jpg", "png", "tif", "tiff", "webp", "pfm"};
  for (const char* f : kFormats) {
    if (ext == f) return true;
  }
  return false;
}

std::vector<std::string> list_image_files(const std::vector<std::string>& sources) {
  std::vector<std::string> files;
  for (const auto& src : sources) {
    std::error_code ec;
    const fs::path p(src);
    if (fs::is_directory(p, ec)) {
      for (fs::recursive_directory_iterator
               it(p, fs::directory_options::follow_directory_symlink, ec),
           end;
           it != end; it.increment(ec)) {
        if (ec) break;
        if (it->is_regular_file(ec)) files.push_back(it->path().string());
      }
    } else if (fs::is_regular_file(p, ec)) {
      std::ifstream in(p);
      if (!in) throw std::runtime_error(src + ": cannot read the image list");
      const std::string parent = p.parent_path().string() + "/";
      std::string line;
      for (bool first = true; std::getline(in, line); first = false) {
        if (first && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 BOM
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
          line.pop_back();
        size_t b = 0;
        while (b < line.size() && std::isspace(static_cast<unsigned char>(line[b]))) ++b;
        line = line.substr(b);
        if (line.empty()) continue;
        if (line.rfind("./", 0) == 0) line = parent + line.substr(2);
        files.push_back(line);
      }
    } else {
      throw std::runtime_error(src +
                               ": dataset source does not exist; check the dataset YAML's "
                               "path/train/val entries");
    }
  }
  files.erase(std::remove_if(files.begin(), files.end(),
                             [](const std::string& f) { return !is_image_file(f); }),
              files.end());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::string list;
    for (const auto& s : sources) list += (list.empty() ? "" : ", ") + s;
    throw std::runtime_error("no images found in " + list +
                             " (supported: bmp jpeg jpg png tif tiff webp pfm)");
  }
  return files;
}

std::string image_to_label_path(const std::string& image_path) {
  std::string out = image_path;
  const auto pos = out.rfind("/images/");
  if (pos != std::string::npos) out.replace(pos, 8, "/labels/");
  const auto dot = out.rfind('.');
  const auto slash = out.rfind('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) out.erase(dot);
  return out + ".txt";
}

std::string label_cache_path(const std::vector<std::string>& sources,
                             const std::vector<std::string>& image_files) {
  std::error_code ec;
  if (!sources.empty() && fs::is_regular_file(sources.back(), ec)) {
    return fs::path(sources.back()).replace_extension(".cache").string();
  }
  const fs::path first_label(image_to_label_path(image_files.at(0)));
  return first_label.parent_path().string() + ".cache";
}

std::string cache_file_in(const std::string& path, const std::string& cache_dir) {
  if (cache_dir.empty()) return path;
  std::error_code ec;
  fs::path folder = fs::absolute(fs::path(path).parent_path(), ec).lexically_normal();
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const unsigned char c : folder.string()) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return (fs::path(cache_dir) / (std::string(hex) + "-" + fs::path(path).filename().string()))
      .string();
}

std::string resolve_cache_dir(const std::string& flag_value) {
  std::string dir = flag_value, from = "--cache-dir " + flag_value;
  if (dir.empty()) {
    const char* env = std::getenv("YOLO_CACHE_DIR");
    if (!env || !*env) return "";
    dir = env;
    from = std::string("YOLO_CACHE_DIR=") + env;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) {
    throw UsageError(from + ": cannot make the cache folder (" +
                     (ec ? ec.message() : std::string("not a folder")) +
                     "); name a writable folder, or leave it unset to keep caches beside the data");
  }
  return dir;
}

}  // namespace yolo

#include "models/weights_hub.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "models/weights.h"
#include "utils/core/fetch.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {

constexpr const char* kYolov5Release =
    "https://github.com/ultralytics/yolov5/releases/download/v7.0";
constexpr const char* kUltralyticsRelease =
    "https://github.com/ultralytics/assets/releases/download/v8.4.0";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::vector<std::string> released_weights() {
  std::vector<std::string> out;
  for (const char* size : {"n", "s", "m", "l", "x"}) {
    out.push_back(std::string("yolov5") + size + ".pt");
    out.push_back(std::string("yolov5") + size + "6.pt");
  }
  for (const char* family : {"yolov8", "yolo11", "yolo26"}) {
    for (const char* size : {"n", "s", "m", "l", "x"})
      out.push_back(family + std::string(size) + ".pt");
  }
  return out;
}

std::string released_weights_url(const std::string& name) {
  bool known = false;
  for (const std::string& n : released_weights()) known = known || n == name;
  if (!known) return "";
  std::string base = env("YOLO_WEIGHTS_URL");
  if (base.empty()) base = name.rfind("yolov5", 0) == 0 ? kYolov5Release : kUltralyticsRelease;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/" + name;
}

std::string weights_cache_dir() {
  if (const std::string dir = env("YOLO_WEIGHTS_DIR"); !dir.empty()) return dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    return (fs::path(xdg) / "yolo_cpp" / "weights").string();
  }
  const std::string home = env("HOME");
  return (fs::path(home.empty() ? "." : home) / ".cache" / "yolo_cpp" / "weights").string();
}

std::string resolve_weights(const std::string& value) {
  const std::string url = released_weights_url(value);
  if (url.empty() || file_problem(value) != "not found") return value;
  const fs::path cached = fs::path(weights_cache_dir()) / value;
  std::error_code ec;
  fs::create_directories(cached.parent_path(), ec);
  // The ranks of a multi-process run all ask for the weights: one downloads, the others wait
  // and find the cached file.
  const DownloadLock lock((cached.parent_path() / ("." + value + ".lock")).string(), value);
  if (fs::is_regular_file(cached, ec)) {
    log_info("weights: " + value + " from " + cached.string());
    return cached.string();
  }
  const std::string manual = "; or download it yourself and pass its path (or put it at " +
                             cached.string() + "; YOLO_WEIGHTS_URL names a mirror)";
  // Downloaded under another name and checked before the cache holds it under its own.
  const std::string fetched = cached.string() + ".download";
  try {
    FetchOptions options = fetch_options_from_env();
    options.label = value;
    fetch_file(url, fetched, options);
  } catch (const FetchError& e) {
    throw std::runtime_error(e.what() + manual);
  }
  try {
    read_weights_file(fetched);
  } catch (const std::exception& e) {
    fs::remove(fetched, ec);
    throw std::runtime_error("the file downloaded from " + url + " is not weights (" + e.what() +
                             "); removed" + manual);
  }
  fs::rename(fetched, cached, ec);
  if (ec)
    throw std::runtime_error("cannot move " + fetched + " to " + cached.string() + ": " +
                             ec.message());
  log_info("weights: " + value + " saved to " + cached.string());
  return cached.string();
}

}  // namespace yolo

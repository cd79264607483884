#include "data/dataset_config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <stdexcept>

#include "data/download.h"
#include "data/shapes_dataset.h"
#include "utils/core/fetch.h"
#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/core/paths.h"
#include "utils/core/yaml_io.h"

namespace fs = std::filesystem;

namespace yolo {
namespace {

constexpr int kMaxClasses = 100000;

std::string where(const std::string& file, const YAML::Node& node) {
  return file + ":" + std::to_string(node.Mark().line + 1);
}

std::vector<std::string> read_sources(const YAML::Node& node, const std::string& key,
                                      const std::string& file, const fs::path& root) {
  std::vector<std::string> raw;
  const YAML::Node v = node[key];
  if (!v || v.IsNull()) return {};
  try {
    if (v.IsScalar()) {
      raw.push_back(v.as<std::string>());
    } else if (v.IsSequence()) {
      for (const auto& x : v) raw.push_back(x.as<std::string>());
    } else {
      throw std::runtime_error("");
    }
  } catch (const std::exception&) {
    throw std::runtime_error(where(file, v) + ": '" + key +
                             "' must be a folder, a .txt image list, or a list of those");
  }
  std::vector<std::string> out;
  for (const auto& r : raw) {
    fs::path p(r);
    if (p.is_relative()) {
      fs::path x = root / p;
      // YOLOv5 also accepts "../x" written relative to the YAML's old location.
      std::error_code ec;
      if (!fs::exists(x, ec) && r.rfind("../", 0) == 0 && fs::exists(root / r.substr(3), ec)) {
        x = root / r.substr(3);
      }
      p = x;
    }
    out.push_back(p.lexically_normal().string());
  }
  return out;
}

// `download:` as archives: a URL (unpacked beside the root), or a list of URLs and {url, dir}
// maps (dir relative to the root). Anything else (YOLOv5's scripts) leaves the list empty.
void read_downloads(const YAML::Node& v, const std::string& file, DatasetConfig& cfg) {
  const std::string beside = fs::path(cfg.root).parent_path().string();
  const auto add = [&](const std::string& url, const std::string& dir, const YAML::Node& at) {
    if (!is_download_url(url)) {
      throw std::runtime_error(where(file, at) + ": download: '" + url +
                               "' is not an archive URL (http(s) or file, .zip, .tar, .tar.gz)");
    }
    cfg.downloads.push_back({url, dir});
    cfg.download += (cfg.download.empty() ? "" : "\n") + url;
  };
  if (v.IsScalar()) {
    if (is_download_url(v.Scalar())) {
      add(v.Scalar(), beside, v);
    } else {
      cfg.download = v.Scalar();  // a script: kept for the message, never run
    }
    return;
  }
  if (!v.IsSequence()) {
    throw std::runtime_error(where(file, v) + ": download: a URL or a list of URLs and {url, dir}");
  }
  for (const YAML::Node& item : v) {
    if (item.IsScalar()) {
      add(item.Scalar(), beside, item);
    } else if (item.IsMap() && item["url"] && item["url"].IsScalar()) {
      std::string dir = beside;
      if (item["dir"]) {
        const fs::path rel = fs::path(yaml_get<std::string>(item, "dir", file)).lexically_normal();
        if (rel.is_absolute() || rel.empty() || *rel.begin() == "..") {
          throw std::runtime_error(where(file, item["dir"]) +
                                   ": download: dir must be a folder inside the dataset's path");
        }
        dir = (fs::path(cfg.root) / rel).string();
      }
      add(item["url"].Scalar(), dir, item["url"]);
    } else {
      throw std::runtime_error(where(file, item) +
                               ": download: each entry is a URL or a {url, dir} map");
    }
  }
}

// Whether `p` could be created: its nearest existing ancestor is a writable folder.
bool writable_ancestor(fs::path p) {
  std::error_code ec;
  p = p.lexically_normal();
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  return !p.empty() && ::access(p.c_str(), W_OK) == 0;
}

}  // namespace

const std::vector<std::string>& DatasetConfig::split(const std::string& name) const {
  if (name == "train") return train;
  if (name == "val") return val;
  if (name == "test") return test;
  throw std::runtime_error("unknown dataset split '" + name + "' (use train, val or test)");
}

DatasetConfig load_dataset_config(const std::string& yaml_path) {
  const YAML::Node node = load_yaml_file(yaml_path);
  if (!node.IsMap()) throw std::runtime_error(yaml_path + ": a dataset YAML must be a mapping");
  DatasetConfig cfg;
  cfg.yaml_path = yaml_path;

  // path: YAML folder first, then the working dir (YOLOv5 uses its repo root instead).
  const fs::path yaml_dir = fs::absolute(fs::path(yaml_path)).parent_path();
  std::string path_value;
  if (node["path"] && !node["path"].IsNull())
    path_value = yaml_get<std::string>(node, "path", yaml_path);
  fs::path root(path_value);
  if (path_value.empty()) {
    root = yaml_dir;  // YOLOv5 falls back to its repo root; the YAML's folder is our analogue
  } else if (root.is_relative()) {
    // First existing of: the YAML's folder, the working dir, the project root (YOLOv5's rule);
    // when none exists yet (data to generate or download) the YAML's folder, or where that cannot
    // be written (an installed tree) datasets/NAME in the working dir.
    std::error_code ec;
    const fs::path candidates[] = {yaml_dir / root, fs::absolute(root),
                                   fs::path(project_root()) / root};
    fs::path chosen;
    for (const auto& c : candidates) {
      if (fs::exists(c, ec)) {
        chosen = c;
        break;
      }
    }
    if (chosen.empty()) {
      chosen = candidates[0];
      if (!writable_ancestor(chosen)) chosen = fs::absolute("datasets") / root.filename();
    }
    root = chosen;
  }
  cfg.root = root.lexically_normal().string();
  if (cfg.root.size() > 1 && cfg.root.back() == '/') cfg.root.pop_back();

  for (const char* key : {"train", "val"}) {
    if (!node[key] || node[key].IsNull()) {
      throw std::runtime_error(yaml_path + ": missing key '" + key +
                               "' (a folder or .txt list of images)");
    }
  }
  cfg.train = read_sources(node, "train", yaml_path, root);
  cfg.val = read_sources(node, "val", yaml_path, root);
  cfg.test = read_sources(node, "test", yaml_path, root);

  const YAML::Node names = node["names"];
  auto name_of = [&](const YAML::Node& n) {
    if (!n.IsScalar()) {
      throw std::runtime_error(where(yaml_path, n) + ": each class name must be a plain string");
    }
    return n.Scalar();
  };
  if (names && names.IsSequence()) {
    for (const auto& n : names) cfg.names.push_back(name_of(n));
  } else if (names && names.IsMap()) {
    std::map<int, std::string> by_id;
    for (const auto& kv : names) {
      int id = -1;
      try {
        id = kv.first.as<int>();
      } catch (const YAML::Exception&) {
        throw std::runtime_error(where(yaml_path, kv.first) +
                                 ": names keys must be class ids 0.."
                                 "nc-1, got '" +
                                 kv.first.Scalar() + "'");
      }
      by_id[id] = name_of(kv.second);
    }
    int expect = 0;
    for (const auto& [id, name] : by_id) {
      if (id != expect) {
        throw std::runtime_error(where(yaml_path, names) + ": names must map every id 0.." +
                                 std::to_string(by_id.size() - 1) + "; id " +
                                 std::to_string(expect) + " is missing");
      }
      cfg.names.push_back(name);
      ++expect;
    }
  } else if (node["nc"]) {
    const int nc = yaml_get<int>(node, "nc", yaml_path);
    // Bounded so a typo (nc: 1000000000) is an error, not an out-of-memory kill.
    if (nc > kMaxClasses) {
      throw std::runtime_error(where(yaml_path, node["nc"]) + ": nc " + std::to_string(nc) +
                               " is more than " + std::to_string(kMaxClasses) + " classes");
    }
    for (int i = 0; i < nc; ++i) cfg.names.push_back("class" + std::to_string(i));
  } else if (names) {
    throw std::runtime_error(where(yaml_path, names) +
                             ": 'names' must be a list of class names or a {id: name} map, got '" +
                             (names.IsScalar() ? names.Scalar() : std::string("null")) + "'");
  } else {
    throw std::runtime_error(yaml_path + ": missing key 'names' (a list, or a {id: name} map)");
  }
  cfg.nc = static_cast<int>(cfg.names.size());
  if (node["nc"]) {
    const int nc = yaml_get<int>(node, "nc", yaml_path);
    if (nc != cfg.nc) {
      throw std::runtime_error(where(yaml_path, node["nc"]) + ": nc is " + std::to_string(nc) +
                               " but names lists " + std::to_string(cfg.nc) +
                               " classes; make them agree");
    }
  }
  if (cfg.nc <= 0) throw std::runtime_error(yaml_path + ": names is empty; list the classes");
  if (node["download"]) read_downloads(node["download"], yaml_path, cfg);
  if (node["generate"]) {
    cfg.generate = yaml_get<std::string>(node, "generate", yaml_path);
    if (cfg.generate != "shapes") {
      throw std::runtime_error(where(yaml_path, node["generate"]) + ": generate: '" + cfg.generate +
                               "' is unknown (only 'shapes' is supported)");
    }
  }
  return cfg;
}

namespace {

std::vector<std::string> missing_sources(const DatasetConfig& cfg) {
  std::vector<std::string> missing;
  std::error_code ec;
  for (const auto* split : {&cfg.train, &cfg.val}) {
    for (const auto& s : *split) {
      if (!fs::exists(s, ec)) missing.push_back(s);
    }
  }
  return missing;
}

}  // namespace

void ensure_dataset(const DatasetConfig& cfg, bool is_rank0, const std::function<void()>& barrier) {
  if (missing_sources(cfg).empty()) {
    if (barrier) barrier();
    return;
  }
  std::exception_ptr error;
  if (is_rank0) {
    try {
      // One process at a time fetches or makes a dataset: a second run started on the same data
      // YAML waits, then finds the data.
      if (cfg.generate == "shapes" || !cfg.downloads.empty()) {
        std::error_code ec;
        fs::path root = fs::path(cfg.root).lexically_normal();
        if (root.filename().empty()) root = root.parent_path();  // "data/" names "data"
        fs::create_directories(root.parent_path(), ec);
        const DownloadLock lock(
            (root.parent_path() / ("." + root.filename().string() + ".download.lock")).string(),
            "the dataset " + one_line(cfg.root));
        if (!missing_sources(cfg).empty()) {
          if (cfg.generate == "shapes") {
            ensure_shapes_dataset(cfg.root);
          } else {
            download_dataset(cfg.downloads);
          }
        }
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (barrier) barrier();
  if (error) std::rethrow_exception(error);
  const auto missing = missing_sources(cfg);
  if (!missing.empty()) {
    std::string msg = cfg.yaml_path + ": dataset not found:";
    for (const auto& m : missing) msg += " " + m;
    if (cfg.download.empty() && cfg.generate.empty()) {
      msg += "; put the images there (labels in the matching labels/ folders) or fix 'path'";
    } else if (cfg.downloads.empty()) {
      msg +=
          "; its 'download' entry is not an archive URL (scripts are not run), so fetch the "
          "data by hand into " +
          cfg.root;
    } else {
      msg += "; the download did not create them, check the archive layout";
    }
    throw std::runtime_error(msg);
  }
}

}  // namespace yolo

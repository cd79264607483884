#include "utils/core/paths.h"

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <system_error>
#include <vector>

#include "utils/core/errors.h"

namespace fs = std::filesystem;

namespace yolo {

namespace {
// An installed program's YAMLs: bin/../share/yolo_cpp beside the running binary, when there.
const std::string& installed_root() {
  static const std::string root = [] {
#ifdef YOLO_DATA_FROM_BIN
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::string();
    const fs::path dir = (exe.parent_path() / YOLO_DATA_FROM_BIN).lexically_normal();
    if (fs::is_directory(dir / "configs", ec)) return dir.string();
#endif
    return std::string();
  }();
  return root;
}
}  // namespace

std::string project_root() {
  if (const char* env = std::getenv("YOLO_ROOT"); env && *env) return env;
  if (!installed_root().empty()) return installed_root();
#ifdef YOLO_SOURCE_ROOT
  return YOLO_SOURCE_ROOT;
#else
  return fs::current_path().string();
#endif
}

namespace {
const char* kind_folder(ConfigKind kind) {
  switch (kind) {
    case ConfigKind::kModel:
      return "configs/models";
    case ConfigKind::kData:
      return "configs/data";
    case ConfigKind::kHyp:
      return "hyp";
  }
  return "";
}
}  // namespace

std::string file_problem(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_regular_file(st)) return "";
  if (fs::is_directory(st)) return "is a folder, not a file";
  if (fs::exists(st)) return "is not a regular file (a device, FIFO or socket)";
  return "not found";
}

ScaledModelName scaled_model_name(const std::string& path) {
  const fs::path p(path);
  const std::string stem = p.stem().string();
  static const std::regex scaled(R"(^(.*\d+)([nslmx])(.*)$)");
  static const std::regex family(R"(yolo(e-)?v?\d+([nslmx]))");
  std::smatch m, f;
  if (!std::regex_match(stem, m, scaled) || !std::regex_search(stem, f, family)) return {};
  return {(p.parent_path() / (m[1].str() + m[3].str() + p.extension().string())).string(),
          f[2].str()};
}

std::string resolve_config(const std::string& value, ConfigKind kind, const std::string& flag) {
  if (value.empty()) return value;
  std::error_code ec;
  // Absolute: a run records what it read, and a later val or resume from another folder must
  // find the same file, not whatever sits at the relative path there.
  if (fs::is_regular_file(value, ec)) return fs::absolute(value).lexically_normal().string();
  // "yolo11s.yaml" names yolo11.yaml at scale s: kept as named, for the model parser to read.
  const auto scaled_exists = [&](const fs::path& c) {
    if (kind != ConfigKind::kModel) return false;
    const ScaledModelName s = scaled_model_name(c.string());
    return !s.unified.empty() && fs::is_regular_file(s.unified, ec);
  };
  if (scaled_exists(value)) return fs::absolute(value).lexically_normal().string();
  if (const std::string why = file_problem(value); why != "not found") {
    throw UsageError(flag + ": '" + value + "' " + why);
  }
  const fs::path p(value);
  std::vector<fs::path> tried{p};
  if (!p.has_parent_path()) {
    const fs::path dir = fs::path(project_root()) / kind_folder(kind);
    std::vector<fs::path> candidates{dir / p};
    if (p.extension() != ".yaml" && p.extension() != ".yml") {
      candidates.push_back(dir / (value + ".yaml"));
    }
    for (const auto& c : candidates) {
      if (fs::is_regular_file(c, ec) || scaled_exists(c)) {
        return fs::absolute(c).lexically_normal().string();
      }
      tried.push_back(c);
    }
  }
  std::string msg = flag + ": file '" + value + "' not found (looked for";
  for (size_t i = 0; i < tried.size(); ++i) msg += (i ? ", " : " ") + tried[i].string();
  msg += "); pass an existing file or a bare name from " + std::string(kind_folder(kind)) + "/";
  const char* env = std::getenv("YOLO_ROOT");
  if (!p.has_parent_path() && env && *env &&
      !fs::is_directory(fs::path(env) / kind_folder(kind), ec)) {
    msg += " (YOLO_ROOT=" + std::string(env) + " has no " + kind_folder(kind) +
           "/: point YOLO_ROOT at the project's root, or unset it)";
  }
  throw UsageError(msg);
}

void make_folders(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  fs::create_directories(dir, ec);
  if (!ec) return;
  // Name the part of the path at fault: a file where a folder should be, or one not writable.
  fs::path at = dir;
  while (at.has_parent_path() && at != at.parent_path() && !fs::exists(at)) at = at.parent_path();
  std::string why = ec.message();
  if (fs::exists(at) && !fs::is_directory(at)) {
    why = "'" + at.string() + "' is a file, not a folder";
  } else if (ec == std::errc::permission_denied || ec == std::errc::read_only_file_system) {
    why = "'" + at.string() + "' cannot be written (" + ec.message() + ")";
  }
  throw UsageError("--project: cannot create the folder '" + dir.string() + "': " + why +
                   "; pass a --project folder this user may write");
}

std::string increment_path(const std::string& path, bool exist_ok, bool mkdir) {
  const fs::path base(path);
  std::error_code ec;
  if (exist_ok) {
    if (mkdir) make_folders(base);
    return base.string();
  }
  for (int n = 1; n < 10000; ++n) {
    fs::path p = n == 1 ? base : fs::path(base.string() + std::to_string(n));
    if (fs::exists(p, ec)) continue;
    if (!mkdir) return p.string();
    if (p.has_parent_path()) make_folders(p.parent_path());
    // create_directory returns false when the folder appeared meanwhile: try the next number.
    if (fs::create_directory(p, ec)) return p.string();
    if (ec) make_folders(p);  // says why
  }
  throw std::runtime_error(path + ": no free run dir name left (exp..exp9999)");
}

std::string sibling_program(const std::string& program) {
  std::error_code ec;
  fs::path bin = fs::read_symlink("/proc/self/exe", ec).parent_path();
  const fs::path rel = fs::relative(bin, fs::current_path(ec), ec);
  if (!ec && !rel.empty() && *rel.begin() != "..") bin = rel;
  return (bin / program).string();
}

std::string safe_file_name(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    out += c == '/' || c == '\\' || u < 0x20 || u == 0x7f ? '_' : c;
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out.size() > 200 ? out.substr(0, 200) : out;
}

}  // namespace yolo

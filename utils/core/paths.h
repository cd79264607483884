#pragma once
// Where things are: the project root, bare config names (docs/ARCHITECTURE.md: looked up in
// configs/models, configs/data and hyp), and incrementing run dirs (runs/train/exp, exp2, ...).
#include <filesystem>
#include <string>

namespace yolo {

enum class ConfigKind { kModel, kData, kHyp };

// Where configs/models, configs/data and hyp are: $YOLO_ROOT when set; for an installed program
// bin/../share/yolo_cpp beside it; else the source tree this binary was built from.
std::string project_root();

// Resolves a --cfg/--data/--hyp value. An existing path is returned absolute; a bare file name
// (no folder part, ".yaml" optional) is looked up in the folder for `kind` under the project root.
// An empty value stays empty. Throws UsageError naming `flag` (a flag, or a file and key) when
// nothing matches.
std::string resolve_config(const std::string& value, ConfigKind kind, const std::string& flag);

// A scaled model name, as Ultralytics reads one: "yolo11s.yaml" (missing) is "yolo11.yaml" at
// scale "s". Returns {unified path, scale letter} when `path`'s file name has the form
// <name><digits><n|s|m|l|x>[suffix].yaml, else {"", ""}. Nothing is read from disk.
struct ScaledModelName {
  std::string unified;
  std::string scale;
};
ScaledModelName scaled_model_name(const std::string& path);

// What keeps `path` from being read as a file: "" for a regular file (or a link to one), else "is
// a folder, not a file", "is not a regular file (a device, FIFO or socket)" or "not found".
std::string file_problem(const std::string& path);

// `program` (a sibling of the running binary, e.g. "val") as a user would type it from the current
// folder: relative when the binary is below it (build/bin/val), else absolute.
std::string sibling_program(const std::string& program);

// YOLOv5's increment_path: returns `path` if free (or `exist_ok`), else path2, path3, ...
// With `mkdir`, the chosen folder is created; a folder created by a concurrent run in between is
// skipped, so two runs never share a run dir.
// A folder the user named, and its parents, are created with errors that say which part is a file
// or cannot be written (UsageError naming --project).
std::string increment_path(const std::string& path, bool exist_ok, bool mkdir);
void make_folders(const std::filesystem::path& dir);

// `name` (a class name, from a data YAML or a file's metadata) as one file or folder name: path
// separators and control bytes become '_', "", "." and ".." get a '_' in front, at most 200 bytes.
// Every path made from such a name stays inside the folder it is put in.
std::string safe_file_name(const std::string& name);

}  // namespace yolo

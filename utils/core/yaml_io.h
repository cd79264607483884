#pragma once
// YAML file loading with errors that name the file and line, and typed scalar access that names
// the key at fault.
#include <yaml-cpp/yaml.h>

#include <string>

namespace yolo {

// Parses a YAML file. Throws std::runtime_error "FILE:LINE:COL: yaml syntax error: ..." on bad
// syntax and "FILE: cannot read" when the file is missing or unreadable.
YAML::Node load_yaml_file(const std::string& path);
// The same for YAML text read elsewhere (a checkpoint's model YAML); errors name `source`.
YAML::Node load_yaml_text(const std::string& text, const std::string& source);
// A whole file as text; throws "FILE: cannot read" as load_yaml_file.
std::string read_text_file(const std::string& path);

// A YAML scalar for a double with 10 significant digits (0.01, not 0.010000000000000000208):
// yaml-cpp otherwise stores every digit of the binary value.
YAML::Node yaml_number(double v);

std::string yaml_dump(const YAML::Node& node);

// Writes `node` to `path` atomically (temporary file + rename).
void save_yaml_file(const YAML::Node& node, const std::string& path);

// Reads `node[key]` as T; throws naming `context` (usually the file) and the key when the value
// is missing or has the wrong type.
template <typename T>
T yaml_get(const YAML::Node& node, const std::string& key, const std::string& context);

}  // namespace yolo

#include "utils/core/yaml_io.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "utils/core/fs_atomic.h"
#include "utils/core/log.h"

namespace yolo {

namespace {
// YOLOv5's rule for a key given twice in one mapping (PyYAML's): the last value wins. Said with a
// warning naming both lines; nested mappings too.
YAML::Node last_value_wins(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return node;
  std::map<std::string, int> last;  // key -> its last position
  std::vector<std::pair<YAML::Node, YAML::Node>> items;
  for (const auto& kv : node) items.emplace_back(kv.first, kv.second);
  bool repeated = false;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].first.IsScalar()) continue;
    const std::string key = items[i].first.Scalar();
    const auto it = last.find(key);
    if (it != last.end()) {
      repeated = true;
      log_warn(path + ":" + std::to_string(items[i].first.Mark().line + 1) + ": '" + key +
               "' is given again (first on line " +
               std::to_string(items[it->second].first.Mark().line + 1) +
               "); the last value is used, as YOLOv5 does");
    }
    last[key] = static_cast<int>(i);
  }
  bool nested = false;
  for (const auto& kv : items) nested = nested || kv.second.IsMap();
  if (!repeated && !nested) return node;
  YAML::Node out(YAML::NodeType::Map);
  for (size_t i = 0; i < items.size(); ++i) {
    const bool scalar = items[i].first.IsScalar();
    if (scalar && last[items[i].first.Scalar()] != static_cast<int>(i)) continue;
    const YAML::Node value = last_value_wins(items[i].second, path);
    if (scalar) {
      out[items[i].first.Scalar()] = value;
    } else {
      out[items[i].first] = value;
    }
  }
  return out;
}
}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read the file (does it exist?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

YAML::Node load_yaml_text(const std::string& text, const std::string& source) {
  try {
    return last_value_wins(YAML::Load(text), source);
  } catch (const YAML::ParserException& e) {
    std::ostringstream msg;
    msg << source << ":" << e.mark.line + 1 << ":" << e.mark.column + 1
        << ": YAML syntax error: " << e.msg;
    throw std::runtime_error(msg.str());
  }
}

YAML::Node load_yaml_file(const std::string& path) {
  return load_yaml_text(read_text_file(path), path);
}

YAML::Node yaml_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return YAML::Node(std::string(buf));
}

std::string yaml_dump(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return std::string(out.c_str()) + "\n";
}

void save_yaml_file(const YAML::Node& node, const std::string& path) {
  write_file_atomic(path, yaml_dump(node));
}

template <typename T>
T yaml_get(const YAML::Node& node, const std::string& key, const std::string& context) {
  const YAML::Node v = node[key];
  if (!v) throw std::runtime_error(context + ": missing key '" + key + "'");
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    std::ostringstream msg;
    msg << context << ":" << v.Mark().line + 1 << ": key '" << key << "' has the wrong type";
    throw std::runtime_error(msg.str());
  }
}

template int yaml_get<int>(const YAML::Node&, const std::string&, const std::string&);
template double yaml_get<double>(const YAML::Node&, const std::string&, const std::string&);
template bool yaml_get<bool>(const YAML::Node&, const std::string&, const std::string&);
template std::string yaml_get<std::string>(const YAML::Node&, const std::string&,
                                           const std::string&);

}  // namespace yolo

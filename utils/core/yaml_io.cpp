#include "utils/core/yaml_io.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "utils/core/fs_atomic.h"

namespace yolo {

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read the file (does it exist?)");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return YAML::Load(ss.str());
  } catch (const YAML::ParserException& e) {
    std::ostringstream msg;
    msg << path << ":" << e.mark.line + 1 << ":" << e.mark.column + 1
        << ": YAML syntax error: " << e.msg;
    throw std::runtime_error(msg.str());
  }
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

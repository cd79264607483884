#pragma once
// Hyperparameters (hyp/*.yaml): a name -> value map with the YOLOv5 v7.0 keys checked on load.
#include <map>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace yolo {

struct Hyp {
  std::map<std::string, double> values;
  // Throws std::runtime_error naming the key when it is missing.
  double at(const std::string& key) const;
  double get(const std::string& key, double fallback) const;
  void set(const std::string& key, double v) { values[key] = v; }
};

// The keys every hyp file must define (YOLOv5 v7.0 hyp.scratch-*.yaml).
const std::vector<std::string>& required_hyp_keys();

// Loads and checks a hyp YAML: numbers only, every required key present; errors name the file,
// line and key.
Hyp load_hyp(const std::string& path);
Hyp hyp_from_yaml(const YAML::Node& node, const std::string& context);
YAML::Node hyp_to_yaml(const Hyp& hyp);

}  // namespace yolo

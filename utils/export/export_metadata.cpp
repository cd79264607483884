#include "utils/export/export_metadata.h"

#include "utils/core/format.h"
#include "utils/core/io/checkpoint.h"

namespace yolo {

namespace {

std::string size_list(const ExportDescription& d) {
  return "[" + std::to_string(d.height) + ", " + std::to_string(d.width) + "]";
}

std::string description(const ExportDescription& d) {
  return "yolo-cpp " + d.model + " detection model";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ultralytics_onnx_metadata(
    const ExportDescription& d) {
  auto py_bool = [](bool b) { return std::string(b ? "True" : "False"); };
  return {{"description", description(d)},
          {"author", "yolo-cpp"},
          {"date", now_iso8601()},
          {"version", YOLO_VERSION},
          {"task", "detect"},
          {"head", "Detect"},
          {"batch", std::to_string(d.batch)},
          {"imgsz", size_list(d)},
          {"args", "{'batch': " + std::to_string(d.batch) + ", 'half': " + py_bool(d.half) +
                       ", 'dynamic': " + py_bool(d.dynamic) + ", 'nms': False}"},
          {"channels", "3"},
          {"end2end", py_bool(d.end2end)}};
}

std::string ultralytics_config_json(const ExportDescription& d) {
  auto js_bool = [](bool b) { return std::string(b ? "true" : "false"); };
  std::string names = "{";
  for (size_t i = 0; i < d.names.size(); ++i) {
    names += (i ? ", " : "") + json_quote(std::to_string(i)) + ": " + json_quote(d.names[i]);
  }
  names += "}";
  return "{\"description\": " + json_quote(description(d)) +
         ", \"author\": \"yolo-cpp\", \"date\": " + json_quote(now_iso8601()) +
         ", \"version\": " + json_quote(YOLO_VERSION) +
         ", \"stride\": " + std::to_string(d.stride) +
         ", \"task\": \"detect\", \"head\": \"Detect\", \"batch\": " + std::to_string(d.batch) +
         ", \"imgsz\": " + size_list(d) + ", \"names\": " + names +
         ", \"args\": {\"batch\": " + std::to_string(d.batch) + ", \"half\": " + js_bool(d.half) +
         ", \"dynamic\": true, \"nms\": false}, \"channels\": 3, \"end2end\": " +
         js_bool(d.end2end) + "}";
}

}  // namespace yolo

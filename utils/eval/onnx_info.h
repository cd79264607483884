#pragma once
// What val and detect need to know of an ONNX file before running it: its metadata (`stride`,
// `names`, as YOLOv5's export.py writes them) and its first input's shape. Read from the protobuf
// wire format directly, so that the programs need no ONNX or protobuf library.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace yolo {

struct OnnxInfo {
  std::map<std::string, std::string> metadata;  // ModelProto.metadata_props
  std::string input_name;
  std::vector<int64_t> input_shape;  // a named (dynamic) dimension is 0
  int input_elem_type = 0;           // TensorProto.DataType: 1 float32, 10 float16
};

// Throws std::runtime_error naming `path` when it cannot be read or is no ONNX model.
OnnxInfo read_onnx_info(const std::string& path);

// YOLOv5's `names` metadata, a Python dict literal {0: 'a', 1: "b's"}, as a list by key. Throws
// std::runtime_error on anything else.
std::vector<std::string> parse_python_names(const std::string& text);

}  // namespace yolo

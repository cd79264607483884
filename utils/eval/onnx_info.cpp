#include "utils/eval/onnx_info.h"

#include <cctype>
#include <fstream>
#include <stdexcept>
#include <string_view>

namespace yolo {

namespace {

// Protobuf's wire format: (field << 3 | type) keys, varints, and length-delimited fields.
class Wire {
 public:
  explicit Wire(std::string_view s) : s_(s) {}
  bool done() const { return p_ >= s_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= s_.size()) throw std::runtime_error("truncated varint");
      const auto b = static_cast<unsigned char>(s_[p_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("malformed varint");
  }
  // The next field: its number and wire type; `bytes` is set for length-delimited ones.
  bool next(uint32_t* field, uint32_t* type, std::string_view* bytes, uint64_t* value) {
    if (done()) return false;
    const uint64_t key = varint();
    *field = static_cast<uint32_t>(key >> 3);
    *type = static_cast<uint32_t>(key & 7);
    switch (*type) {
      case 0:
        *value = varint();
        break;
      case 1:
        skip(8);
        break;
      case 2: {
        const uint64_t n = varint();
        if (n > s_.size() - p_) throw std::runtime_error("a field runs past the end");
        *bytes = s_.substr(p_, n);
        p_ += n;
        break;
      }
      case 5:
        skip(4);
        break;
      default:
        throw std::runtime_error("unsupported wire type " + std::to_string(*type));
    }
    return true;
  }

 private:
  void skip(size_t n) {
    if (n > s_.size() - p_) throw std::runtime_error("a field runs past the end");
    p_ += n;
  }
  std::string_view s_;
  size_t p_ = 0;
};

// Calls fn(field, type, bytes, value) for every field of the message `m`.
template <class Fn>
void each_field(std::string_view m, Fn fn) {
  Wire w(m);
  uint32_t field = 0, type = 0;
  std::string_view bytes;
  uint64_t value = 0;
  while (w.next(&field, &type, &bytes, &value)) fn(field, type, bytes, value);
}

// ValueInfoProto -> name, element type and dimensions.
void read_value_info(std::string_view v, OnnxInfo& info) {
  each_field(v, [&](uint32_t f, uint32_t t, std::string_view b, uint64_t) {
    if (f == 1 && t == 2) info.input_name = std::string(b);
    if (f != 2 || t != 2) return;  // TypeProto
    each_field(b, [&](uint32_t f2, uint32_t t2, std::string_view tensor, uint64_t) {
      if (f2 != 1 || t2 != 2) return;  // TypeProto.Tensor
      each_field(tensor, [&](uint32_t f3, uint32_t t3, std::string_view shape, uint64_t x) {
        if (f3 == 1 && t3 == 0) info.input_elem_type = static_cast<int>(x);
        if (f3 != 2 || t3 != 2) return;  // TensorShapeProto
        each_field(shape, [&](uint32_t f4, uint32_t t4, std::string_view dim, uint64_t) {
          if (f4 != 1 || t4 != 2) return;
          int64_t d = 0;
          each_field(dim, [&](uint32_t f5, uint32_t t5, std::string_view, uint64_t dv) {
            if (f5 == 1 && t5 == 0) d = static_cast<int64_t>(dv);
          });
          info.input_shape.push_back(d);
        });
      });
    });
  });
}

}  // namespace

OnnxInfo read_onnx_info(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open the ONNX file");
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  OnnxInfo info;
  bool has_graph = false, has_ir = false, has_input = false;
  try {
    each_field(bytes, [&](uint32_t field, uint32_t type, std::string_view b, uint64_t) {
      if (field == 1 && type == 0) has_ir = true;
      if (field == 14 && type == 2) {  // metadata_props: StringStringEntryProto
        std::string key, value;
        each_field(b, [&](uint32_t f, uint32_t t, std::string_view s, uint64_t) {
          if (f == 1 && t == 2) key = std::string(s);
          if (f == 2 && t == 2) value = std::string(s);
        });
        info.metadata[key] = value;
      }
      if (field == 7 && type == 2) {  // graph
        has_graph = true;
        each_field(b, [&](uint32_t f, uint32_t t, std::string_view v, uint64_t) {
          if (f == 11 && t == 2 && !has_input) {
            has_input = true;
            read_value_info(v, info);
          }
        });
      }
    });
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not an ONNX model (" + e.what() + ")");
  }
  if (!has_ir || !has_graph || !has_input) {
    throw std::runtime_error(path + ": not an ONNX model (no IR version, graph or graph input)");
  }
  return info;
}

std::vector<std::string> parse_python_names(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return std::runtime_error("the names metadata is not a dict of class names (" + why +
                              "): " + text.substr(0, 80));
  };
  size_t p = 0;
  const auto skip_space = [&] {
    while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
  };
  skip_space();
  if (p >= text.size() || text[p] != '{') throw bad("no opening brace");
  ++p;
  std::map<long, std::string> by_key;
  for (;;) {
    skip_space();
    if (p < text.size() && text[p] == '}') break;
    size_t used = 0;
    long key = 0;
    try {
      key = std::stol(text.substr(p), &used);
    } catch (const std::exception&) {
      throw bad("a key is not an integer");
    }
    p += used;
    skip_space();
    if (p >= text.size() || text[p] != ':') throw bad("no ':' after a key");
    ++p;
    skip_space();
    if (p >= text.size() || (text[p] != '\'' && text[p] != '"')) throw bad("a value is not text");
    const char q = text[p++];
    std::string v;
    for (;; ++p) {
      if (p >= text.size()) throw bad("unterminated text");
      if (text[p] == q) break;
      if (text[p] != '\\') {
        v += text[p];
        continue;
      }
      if (++p >= text.size()) throw bad("unterminated text");
      const char e = text[p];
      if (e == 'n') {
        v += '\n';
      } else if (e == 't') {
        v += '\t';
      } else if (e == 'r') {
        v += '\r';
      } else if (e == 'x' && p + 2 < text.size()) {
        v += static_cast<char>(std::stoi(text.substr(p + 1, 2), nullptr, 16));
        p += 2;
      } else {
        v += e;
      }
    }
    ++p;
    by_key[key] = v;
    skip_space();
    if (p < text.size() && text[p] == ',') ++p;
  }
  std::vector<std::string> names;
  for (const auto& [k, v] : by_key) {
    if (k != static_cast<long>(names.size())) throw bad("the keys are not 0, 1, 2, ...");
    names.push_back(v);
  }
  return names;
}

}  // namespace yolo

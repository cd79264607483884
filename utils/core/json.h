#pragma once
// A small JSON reader for the files COCO tools exchange (annotations, results). Values are a
// plain tree; keys listed in `skip` are checked for syntax but not stored, which keeps COCO's
// polygon lists out of memory when only boxes are wanted.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace yolo {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string str;                                         // kString
  std::vector<JsonValue> items;                            // kArray
  std::vector<std::pair<std::string, JsonValue>> members;  // kObject, in file order

  bool is_number() const { return type == Type::kNumber; }
  bool is_string() const { return type == Type::kString; }
  bool is_array() const { return type == Type::kArray; }
  bool is_object() const { return type == Type::kObject; }
  // The member named `key`, or nullptr (also when this is not an object).
  const JsonValue* find(const std::string& key) const;
};

// Parses `text`; throws std::runtime_error "<where>:<line>:<column>: <what is wrong>".
JsonValue parse_json(const std::string& text, const std::string& where,
                     const std::set<std::string>& skip = {});
// Reads and parses a file; errors name the file (missing, unreadable, bad JSON at line:column).
JsonValue read_json_file(const std::string& path, const std::set<std::string>& skip = {});

// `s` with JSON string escapes, in quotes.
std::string json_quote(const std::string& s);

}  // namespace yolo

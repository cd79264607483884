#pragma once
// Reading JSON files (COCO annotations and results) with simdjson's on-demand parser: the file is
// loaded once and values are parsed where a reader asks for them, so COCO's polygons are checked
// but never stored. Malformed text fails with "<file>:<line>:<column>: <what is wrong>".
#include <simdjson.h>

#include <functional>
#include <string>

namespace yolo {

namespace json = simdjson::ondemand;

// Loads `path` and calls `read` with its document. `read` walks it forward (simdjson's on-demand
// rules: each value once, in file order) and must consume the whole top-level value, skipping
// what it does not keep with json_skip. simdjson's errors, thrown as simdjson::simdjson_error
// inside `read`, become std::runtime_error naming the file and the line:column where parsing
// stopped; so do a missing or unreadable file and text after the top-level value. Other
// exceptions from `read` pass through unchanged.
void read_json_file(const std::string& path, const std::function<void(json::document&)>& read);

// Walks a value that is not kept, checking that everything in it (numbers, strings, literals,
// nesting) is well-formed JSON, as a full parser would.
void json_skip(json::value value);

// The value as a double if it is a JSON number; false (and `out` unchanged) for other types.
bool json_number(json::value& value, double& out);

}  // namespace yolo

#include "utils/eval/json.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <system_error>

namespace fs = std::filesystem;

namespace yolo {

namespace {

// The file in simdjson's padded buffer (it reads a few bytes past the end with SIMD loads).
simdjson::padded_string load(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw std::runtime_error(path + ": is a folder, not a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  const auto size = fs::is_regular_file(path, ec) ? fs::file_size(path, ec) : 0;
  if (ec || size == 0) {  // a pipe, or a size we cannot get: read it as a stream
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) throw std::runtime_error(path + ": read error");
    return simdjson::padded_string(text);
  }
  simdjson::padded_string text(size);
  if (!in.read(text.data(), static_cast<std::streamsize>(size)) ||
      in.gcount() != std::streamsize(size))
    throw std::runtime_error(path + ": read error (the file changed while it was read?)");
  return text;
}

std::string line_column(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

// The opening quote of a string that never closes, or npos.
size_t unclosed_string(std::string_view t) {
  size_t open = std::string_view::npos;
  for (size_t i = 0; i < t.size(); ++i) {
    if (open != std::string_view::npos) {
      if (t[i] == '\\') {
        ++i;
      } else if (t[i] == '"') {
        open = std::string_view::npos;
      }
    } else if (t[i] == '"') {
      open = i;
    }
  }
  return open;
}

// The first byte that does not start a valid UTF-8 sequence (overlong forms, surrogates and code
// points above U+10FFFF count as invalid, as in simdjson), or npos.
size_t invalid_utf8(std::string_view t) {
  const auto* s = reinterpret_cast<const unsigned char*>(t.data());
  for (size_t i = 0; i < t.size();) {
    const unsigned c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > t.size()) return i;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string describe(simdjson::error_code e) {
  using simdjson::error_code;
  switch (e) {
    case error_code::TAPE_ERROR:
      return "malformed JSON (a missing or extra comma, colon, bracket or brace?)";
    case error_code::INCORRECT_TYPE:
      return "unexpected character";
    case error_code::NUMBER_ERROR:
      return "malformed number (or an unclosed list or object at the end of the file)";
    case error_code::NUMBER_OUT_OF_RANGE:
      return "number out of range";
    case error_code::STRING_ERROR:
      return "malformed string (a bad escape?)";
    case error_code::T_ATOM_ERROR:
    case error_code::F_ATOM_ERROR:
    case error_code::N_ATOM_ERROR:
      return "unexpected character (not true, false or null)";
    case error_code::UNCLOSED_STRING:
      return "a string opened here is never closed";
    case error_code::UTF8_ERROR:
      return "invalid UTF-8";
    case error_code::UNESCAPED_CHARS:
      return "control character in a string";
    case error_code::EMPTY:
      return "no JSON value (the file is empty or only whitespace)";
    case error_code::DEPTH_ERROR:
      return "nested too deeply";
    case error_code::CAPACITY:
      return "larger than the 4 GB a JSON file may have";
    default:
      return simdjson::error_message(e);
  }
}

}  // namespace

void read_json_file(const std::string& path, const std::function<void(json::document&)>& read) {
  const simdjson::padded_string text = load(path);
  const std::string_view view(text.data(), text.size());
  auto fail_at = [&](size_t offset, const std::string& what) {
    throw std::runtime_error(path + ":" + line_column(view, offset) + ": " + what);
  };
  json::parser parser;
  json::document doc;
  if (const auto e = parser.iterate(text).get(doc)) {
    // The structural pass found it; simdjson does not say where, so look.
    const size_t at = e == simdjson::UNCLOSED_STRING ? unclosed_string(view)
                      : e == simdjson::UTF8_ERROR    ? invalid_utf8(view)
                                                     : std::string_view::npos;
    if (at != std::string_view::npos) fail_at(at, describe(e));
    throw std::runtime_error(path + ": " + describe(e));
  }
  auto position = [&] {
    const auto where = doc.current_location();
    return where.error() ? view.size() : static_cast<size_t>(where.value_unsafe() - text.data());
  };
  try {
    read(doc);
  } catch (const simdjson::simdjson_error& e) {
    fail_at(position(), describe(e.error()));
  }
  // Past the top-level value the document has no current location, unless text follows.
  if (!doc.current_location().error()) fail_at(position(), "unexpected text after the JSON value");
}

void json_skip(json::value value) {
  switch (value.type().value()) {
    case json::json_type::array:
      for (auto item : value.get_array()) json_skip(item.value());
      break;
    case json::json_type::object:
      for (auto member : value.get_object()) {
        (void)member.unescaped_key().value();
        json_skip(member.value().value());
      }
      break;
    case json::json_type::number:
      (void)value.get_double().value();
      break;
    case json::json_type::string:
      (void)value.get_string().value();
      break;
    case json::json_type::boolean:
      (void)value.get_bool().value();
      break;
    case json::json_type::null:
      if (!value.is_null().value()) throw simdjson::simdjson_error(simdjson::N_ATOM_ERROR);
      break;
  }
}

bool json_number(json::value& value, double& out) {
  if (value.type().value() != json::json_type::number) return false;
  out = value.get_double().value();
  return true;
}

}  // namespace yolo

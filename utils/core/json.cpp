#include "utils/core/json.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace yolo {

namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& where, const std::set<std::string>& skip)
      : s_(text), where_(where), skip_(skip) {}

  JsonValue document() {
    JsonValue v = value(0);
    ws();
    if (i_ < s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw std::runtime_error(where_ + ":" + std::to_string(line) + ":" + std::to_string(col) +
                             ": " + what);
  }

  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }

  char peek() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end of file");
    return s_[i_];
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }

  void literal(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) != 0) fail("unexpected character");
    i_ += n;
  }

  JsonValue value(int depth) {
    if (depth > 512) fail("nested too deeply");
    JsonValue v;
    switch (peek()) {
      case '{':
        object(v, depth);
        break;
      case '[':
        array(v, depth);
        break;
      case '"':
        v.type = JsonValue::Type::kString;
        v.str = string();
        break;
      case 't':
        literal("true");
        v.type = JsonValue::Type::kBool;
        v.boolean = true;
        break;
      case 'f':
        literal("false");
        v.type = JsonValue::Type::kBool;
        break;
      case 'n':
        literal("null");
        break;
      default:
        v.type = JsonValue::Type::kNumber;
        v.number = number();
    }
    return v;
  }

  void object(JsonValue& v, int depth) {
    v.type = JsonValue::Type::kObject;
    expect('{');
    if (peek() == '}') {
      ++i_;
      return;
    }
    for (;;) {
      if (peek() != '"') fail("expected a quoted member name");
      std::string key = string();
      expect(':');
      JsonValue member = value(depth + 1);
      if (!skip_.count(key)) v.members.emplace_back(std::move(key), std::move(member));
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}');
      return;
    }
  }

  void array(JsonValue& v, int depth) {
    v.type = JsonValue::Type::kArray;
    expect('[');
    if (peek() == ']') {
      ++i_;
      return;
    }
    for (;;) {
      v.items.push_back(value(depth + 1));
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect(']');
      return;
    }
  }

  double number() {
    const char* begin = s_.c_str() + i_;
    if (!(*begin == '-' || (*begin >= '0' && *begin <= '9'))) fail("unexpected character");
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(begin, &end);
    if (end == begin) fail("bad number");
    i_ += static_cast<size_t>(end - begin);
    return d;
  }

  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') {
        cp |= static_cast<uint32_t>(c - '0');
      } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
        cp |= static_cast<uint32_t>((c | 0x20) - 'a' + 10);
      } else {
        fail("bad \\u escape");
      }
    }
    return cp;
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {
            i_ += 2;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4() - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape in a string");
      }
    }
  }

  const std::string& s_;
  const std::string& where_;
  const std::set<std::string>& skip_;
  size_t i_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

JsonValue parse_json(const std::string& text, const std::string& where,
                     const std::set<std::string>& skip) {
  return Parser(text, where, skip).document();
}

JsonValue read_json_file(const std::string& path, const std::set<std::string>& skip) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path, skip);
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace yolo

#include "utils/core/format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace yolo {

std::string format_number(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

std::string class_name(const std::vector<std::string>& names, int cls) {
  return cls >= 0 && cls < static_cast<int>(names.size()) ? names[cls] : std::to_string(cls);
}

std::string terminal_safe(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&out](unsigned char c) {
    static const char* const kDigits = "0123456789abcdef";
    out += "\\x";
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      hex(c);
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // a C1 control, UTF-8 encoded
      hex(c);
      hex(next);
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string one_line(const std::string& s) {
  if (s.find_first_of("\n\r") == std::string::npos) return s;
  std::string out;
  out.reserve(s.size() + 8);
  for (const char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
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

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_word(const std::string& word, const std::vector<std::string>& candidates,
                         size_t max_edits) {
  std::string best;
  size_t best_d = max_edits + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::vector<std::string> close_words(const std::string& word,
                                     const std::vector<std::string>& candidates, size_t max_edits,
                                     size_t limit) {
  std::vector<std::pair<size_t, std::string>> near;
  for (const std::string& c : candidates) {
    if (c == word) continue;
    size_t d = edit_distance(word, c);
    // A transposition (modle / model) is one slip, not two substitutions.
    for (size_t i = 0; i + 1 < word.size() && word.size() == c.size(); ++i) {
      if (word[i] != c[i] && word[i] == c[i + 1] && word[i + 1] == c[i] &&
          word.compare(i + 2, std::string::npos, c, i + 2, std::string::npos) == 0 &&
          word.compare(0, i, c, 0, i) == 0) {
        d = 1;
      }
    }
    if (d <= max_edits &&
        std::none_of(near.begin(), near.end(), [&](const auto& n) { return n.second == c; })) {
      near.emplace_back(d, c);
    }
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& n : near) {
    if (out.size() < limit && n.first == near.front().first) out.push_back(n.second);
  }
  return out;
}

std::string quoted_choices(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += "'" + words[i] + "'";
  }
  return out;
}

std::string shell_word(const std::string& s) {
  const std::string shown = terminal_safe(one_line(s));
  const bool plain = !shown.empty() && std::all_of(shown.begin(), shown.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./:=@%+,-", c) != nullptr;
  });
  if (plain) return shown;
  std::string out = "'";
  for (const char c : shown) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace yolo

#include "utils/core/cli.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "utils/core/errors.h"
#include "utils/core/log.h"

namespace yolo::cli {

bool looks_like_value(const std::string& s) {
  if (s.empty()) return true;
  if (s.rfind("--", 0) == 0) return false;
  if (s[0] == '-') {  // a negative number is a value, "-x" a flag
    return s.size() > 1 && (std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.');
  }
  return true;
}

int parse_int(const std::string& flag, const std::string& v) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::out_of_range&) {
    used = 0;
    x = INT64_MAX;  // digits beyond 64 bits: too large, said below
  } catch (const std::exception&) {
    throw UsageError("--" + flag + ": expected an integer, got '" + v + "'");
  }
  if (x == INT64_MAX || (used == v.size() && (x < INT32_MIN || x > INT32_MAX))) {
    throw UsageError("--" + flag + ": " + v + " is out of range (at most " +
                     std::to_string(INT32_MAX) + ")");
  }
  if (used != v.size()) throw UsageError("--" + flag + ": expected an integer, got '" + v + "'");
  return static_cast<int>(x);
}

double parse_double(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + flag + ": expected a number, got '" + v + "'");
}

// A switch takes no word, or one from "--flag=false".
void parse_into(const std::string& flag, const std::vector<std::string>& w, bool& v) {
  if (w.empty() || w[0] == "true" || w[0] == "True" || w[0] == "t" || w[0] == "T" || w[0] == "1") {
    v = true;
  } else if (w[0] == "false" || w[0] == "False" || w[0] == "f" || w[0] == "F" || w[0] == "0") {
    v = false;
  } else {
    throw UsageError("--" + flag + ": expected true or false, got '" + w[0] + "'");
  }
}
void parse_into(const std::string& flag, const std::vector<std::string>& w, int& v) {
  v = parse_int(flag, w.at(0));
}
void parse_into(const std::string& flag, const std::vector<std::string>& w, double& v) {
  v = parse_double(flag, w.at(0));
}
void parse_into(const std::string&, const std::vector<std::string>& w, std::string& v) {
  v = w.at(0);
}
void parse_into(const std::string& flag, const std::vector<std::string>& w, std::vector<int>& v) {
  v.clear();
  for (const auto& word : w) {
    size_t from = 0;
    for (size_t comma; (comma = word.find(',', from)) != std::string::npos; from = comma + 1) {
      v.push_back(parse_int(flag, word.substr(from, comma - from)));
    }
    v.push_back(parse_int(flag, word.substr(from)));
  }
}

void parse_into(const std::string&, const std::vector<std::string>& w,
                std::vector<std::string>& v) {
  v.clear();
  for (const auto& word : w) {
    size_t from = 0;
    for (size_t comma; (comma = word.find(',', from)) != std::string::npos; from = comma + 1) {
      v.push_back(word.substr(from, comma - from));
    }
    v.push_back(word.substr(from));
  }
}

std::string show(bool) { return ""; }
std::string show(int v) { return std::to_string(v); }
std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}
std::string show(const std::string& v) { return v; }
std::string show(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

std::string show(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

std::function<std::string(const int&)> at_least(int min, const char* what) {
  return [min, what](const int& v) -> std::string {
    if (v >= min) return "";
    if (what) return what;
    return "must be >= " + std::to_string(min) + " (got " + std::to_string(v) + ")";
  };
}

std::string image_size(const int& v) {
  if (v >= 1 && v <= kMaxImageSize) return "";
  return "must be between 1 and " + std::to_string(kMaxImageSize) + " pixels (got " +
         std::to_string(v) + ")";
}

std::string image_sizes(const std::vector<int>& v) {
  for (const int s : v) {
    if (std::string bad = image_size(s); !bad.empty()) return bad;
  }
  return "";
}

std::string run_name(const std::string& v) {
  if (!v.empty() && v.find('/') == std::string::npos && v != "." && v != "..") return "";
  return "must be one folder name inside --project (not empty, no '/', not '.' or '..'), got '" +
         v + "'";
}

std::string not_empty(const std::string& v) { return v.empty() ? "must not be empty" : ""; }

std::function<std::string(const double&)> in_range(double lo, double hi) {
  return [lo, hi](const double& v) -> std::string {
    if (v >= lo && v <= hi) return "";
    return "must be in [" + show(lo) + ", " + show(hi) + "]";
  };
}

std::function<std::string(const std::string&)> empty_or_one_of(std::vector<std::string> choices) {
  return [choices](const std::string& v) -> std::string {
    if (v.empty() || std::count(choices.begin(), choices.end(), v)) return "";
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i) {
      list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + ("'" + choices[i] + "'");
    }
    return "must be " + list + " (got '" + v + "')";
  };
}

namespace {

const FlagSpec* find_flag(const std::vector<const FlagSpec*>& specs, const std::string& spelling,
                          size_t& index) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const FlagSpec& f = *specs[i];
    if (f.arity == Arity::kYamlOnly) continue;
    if (spelling == "--" + f.name ||
        std::find(f.aliases.begin(), f.aliases.end(), spelling) != f.aliases.end()) {
      index = i;
      return &f;
    }
  }
  return nullptr;
}

// The words after argv[i] that give `f` its value (argparse's rules); moves i past them.
std::vector<std::string> take_values(const FlagSpec& f, int argc, const char* const* argv, int& i,
                                     const std::string& app) {
  std::vector<std::string> words;
  const auto next_is_value = [&] { return i + 1 < argc && looks_like_value(argv[i + 1]); };
  switch (f.arity) {
    case Arity::kOne:
      if (i + 1 == argc) {
        throw UsageError("--" + f.name + ": expected a value (see " + app + " --help)");
      }
      words.emplace_back(argv[++i]);
      break;
    case Arity::kOptional:
      words.push_back(next_is_value() ? argv[++i] : f.bare);
      break;
    case Arity::kList:
      while (next_is_value()) words.emplace_back(argv[++i]);
      if (words.empty()) {
        throw UsageError("--" + f.name + ": expected one or more values (see " + app + " --help)");
      }
      break;
    default:  // a switch
      break;
  }
  return words;
}

// "--batch-size, --batch N" as --help shows it.
std::string flag_usage(const FlagSpec& f) {
  std::string s = "--" + f.name;
  for (const auto& a : f.aliases) s += ", " + a;
  switch (f.arity) {
    case Arity::kOne:
      return s + " " + f.metavar;
    case Arity::kOptional:
      return s + " [" + f.metavar + "]";
    case Arity::kList:
      return s + " " + f.metavar + " [" + f.metavar + " ...]";
    default:
      return s;
  }
}

std::string flag_description(const FlagSpec& f) {
  std::string d = f.help;
  const std::string def = f.show_default && f.default_text ? f.default_text() : "";
  if (f.arity == Arity::kOptional && !f.bare.empty()) {
    d += " (alone: " + f.bare + ")";
  } else if (f.arity != Arity::kOptional && !def.empty()) {
    d += " (default: " + def + ")";
  }
  return d;
}

// `text` in lines of at most `width` columns, the lines after the first indented by `indent`.
std::string wrap(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (!line.empty() && indent + line.size() + 1 + w.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line;
}

}  // namespace

Scan scan(const std::vector<const FlagSpec*>& specs, int argc, const char* const* argv,
          const std::string& app) {
  Scan out;
  std::vector<std::string> strays;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {  // everything after it is an argument, and the programs take none
      for (++i; i < argc; ++i) strays.emplace_back(argv[i]);
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a == "--version") {
      out.version = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-') {
      strays.push_back(a);
      continue;
    }
    const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    const std::string spelling = a.substr(0, eq);
    size_t index = 0;
    const FlagSpec* f = find_flag(specs, spelling, index);
    if (!f) throw UsageError("unknown flag '" + spelling + "' (see " + app + " --help)");
    out.given.emplace_back(index, eq == std::string::npos
                                      ? take_values(*f, argc, argv, i, app)
                                      : std::vector<std::string>{a.substr(eq + 1)});
  }
  if (!out.help && !out.version && !strays.empty()) {
    throw UsageError("unexpected argument '" + strays[0] + "' (see " + app + " --help)");
  }
  return out;
}

std::string help_text(const std::vector<const FlagSpec*>& specs, const std::string& title,
                      const std::string& app, const std::string& version_help) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const FlagSpec* f : specs) {
    if (f->arity != Arity::kYamlOnly) rows.emplace_back(flag_usage(*f), flag_description(*f));
  }
  rows.emplace_back("--version", version_help);
  rows.emplace_back("-h, --help", "show this help and exit");
  const size_t col = 34, width = 100;
  std::string out = title + "\nUsage:\n  " + app + " [flags]\n\n";
  for (const auto& [usage, text] : rows) {
    std::string head = "  " + usage;
    head += head.size() + 2 <= col ? std::string(col - head.size(), ' ')
                                   : "\n" + std::string(col, ' ');  // too long: own line
    out += head + wrap(text, col, width) + "\n";
  }
  return out;
}

}  // namespace yolo::cli

namespace yolo {

int check_img_size(int imgsz, int stride) {
  if (imgsz < 1) throw UsageError("--imgsz: must be >= 1 (got " + std::to_string(imgsz) + ")");
  const int rounded = std::max((imgsz + stride - 1) / stride * stride, 2 * stride);
  if (rounded != imgsz) {
    log_warn("--imgsz " + std::to_string(imgsz) + " must be multiple of max stride " +
             std::to_string(stride) + ", updating to " + std::to_string(rounded));
  }
  return rounded;
}

}  // namespace yolo

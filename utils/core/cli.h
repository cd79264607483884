#pragma once
// Command lines read as YOLOv5's argparse reads them, declared as tables: each flag is bound once
// to a member of the program's options struct, and the table gives its parsing, its --help line,
// its value check and (for train) its opt.yaml key. train, val and detect each declare one table.
//
//   struct Args { int epochs = 100; bool rect = false; };
//   const std::vector<cli::Flag<Args>> table = {
//       cli::Bind("epochs", &Args::epochs, "total training epochs").check(cli::at_least(1)),
//       cli::Bind("rect", &Args::rect, "rectangular training")};
//   cli::Parsed<Args> p = cli::parse(table, argc, argv, "train");
#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "utils/core/yaml_io.h"

namespace yolo::cli {

// How a flag takes its value on the command line: argparse's forms, each also as --flag=value.
enum class Arity {
  kSwitch,    // --rect
  kOne,       // --epochs 3: the next word, whatever it is
  kOptional,  // --evolve [N]: the next word when it looks like a value, else FlagSpec::bare
  kList,      // --freeze 0 1 2: every following word that looks like a value (nargs='+')
  kYamlOnly,  // no flag: an opt.yaml key only
};

// What parsing and --help need of a flag, whatever struct it fills.
struct FlagSpec {
  std::string name;                  // without dashes; the spelling Parsed::given records
  std::vector<std::string> aliases;  // other accepted spellings, with dashes
  Arity arity = Arity::kOne;
  std::string bare;  // kOptional: the value of the flag given alone
  std::string metavar;
  std::string help;
  std::string yaml_key;  // opt.yaml key; empty: not saved
  bool show_default = true;
  std::function<std::string()> default_text;  // the default as --help shows it; "" for none
};

// One flag of the options struct O.
template <class O>
struct Flag : FlagSpec {
  std::function<void(O&, const std::vector<std::string>&)> parse;  // throws UsageError
  std::function<std::string(const O&)> check;  // what is wrong with the value, or ""
  std::function<YAML::Node(const O&)> write;
  std::function<void(O&, const YAML::Node&)> read;  // throws YAML::Exception: wrong type
};

// The words of one flag, in argparse's conversions; each throws UsageError naming --flag.
bool looks_like_value(const std::string& word);  // a negative number is a value, "-x" a flag
int parse_int(const std::string& flag, const std::string& word);
double parse_double(const std::string& flag, const std::string& word);
void parse_into(const std::string& flag, const std::vector<std::string>& words, bool& v);
void parse_into(const std::string& flag, const std::vector<std::string>& words, int& v);
void parse_into(const std::string& flag, const std::vector<std::string>& words, double& v);
void parse_into(const std::string& flag, const std::vector<std::string>& words, std::string& v);
// Each word may itself be a comma list ("--freeze=0,1,2", "--classes 0,2 3").
void parse_into(const std::string& flag, const std::vector<std::string>& words,
                std::vector<int>& v);
void parse_into(const std::string& flag, const std::vector<std::string>& words,
                std::vector<std::string>& v);

// A member's value as --help shows it; "" shows none (switches are off, empty strings unset).
std::string show(bool v);
std::string show(int v);
std::string show(double v);
std::string show(const std::string& v);
std::string show(const std::vector<int>& v);
std::string show(const std::vector<std::string>& v);

// Builds a Flag bound to the member `m` of O; the member's type gives the parsing, the opt.yaml
// form and the shown default (O's initializer), and the methods adjust the rest.
template <class O, class T>
class Bind {
 public:
  using Rule = std::function<std::string(const T&)>;

  Bind(const char* name, T O::*m, const char* help) : Bind(name, m, "", help) {}
  Bind(const char* name, T O::*m, const char* yaml_key, const char* help) : m_(m) {
    f_.name = name;
    f_.yaml_key = yaml_key;
    f_.help = help;
    if constexpr (std::is_same_v<T, bool>) f_.arity = Arity::kSwitch;
    if constexpr (std::is_same_v<T, std::vector<int>> ||
                  std::is_same_v<T, std::vector<std::string>>) {
      f_.arity = Arity::kList;
    }
    f_.metavar = std::is_same_v<T, int> || std::is_same_v<T, std::vector<int>> ? "N" : upper(name);
    const std::string flag = name;
    f_.parse = [m, flag](O& o, const std::vector<std::string>& w) { parse_into(flag, w, o.*m); };
    f_.write = [m](const O& o) { return to_node(o.*m); };
    f_.read = [m](O& o, const YAML::Node& v) { o.*m = v.template as<T>(); };
    f_.default_text = [m] { return show(O{}.*m); };
  }
  Bind& alias(const char* spelling) {
    f_.aliases.emplace_back(spelling);
    return *this;
  }
  Bind& metavar(const char* m) {
    f_.metavar = m;
    return *this;
  }
  // The flag given alone means `bare`. While the member keeps its default (off), opt.yaml holds
  // null, as YOLOv5's.
  Bind& optional(const char* bare) {
    f_.arity = Arity::kOptional;
    f_.bare = bare;
    f_.write = [m = m_](const O& o) {
      return o.*m == O{}.*m ? YAML::Node(YAML::NodeType::Null) : to_node(o.*m);
    };
    return *this;
  }
  Bind& check(Rule rule) {
    f_.check = [m = m_, rule](const O& o) { return rule(o.*m); };
    return *this;
  }
  Bind& parse_with(std::function<void(O&, const std::string&)> parse) {
    f_.parse = [parse](O& o, const std::vector<std::string>& w) { parse(o, w.at(0)); };
    return *this;
  }
  Bind& yaml_with(std::function<YAML::Node(const O&)> write,
                  std::function<void(O&, const YAML::Node&)> read) {
    if (write) f_.write = std::move(write);
    f_.read = std::move(read);
    return *this;
  }
  Bind& no_default() {
    f_.show_default = false;
    return *this;
  }
  Bind& yaml_only() {
    f_.arity = Arity::kYamlOnly;
    return *this;
  }
  // Implicit, so that a table can list Binds of any member type as Flags.
  operator Flag<O>() const { return f_; }

 private:
  static std::string upper(std::string s) {
    for (char& c : s) c = c == '-' ? '_' : (c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c);
    return s;
  }
  // A member's opt.yaml value: what YOLOv5's yaml.safe_dump writes for it.
  static YAML::Node to_node(const T& v) {
    if constexpr (std::is_same_v<T, double>) {
      return yaml_number(v);
    } else {
      return YAML::Node(v);
    }
  }

  T O::*m_;
  Flag<O> f_;
};

// Rules for Bind::check: each says what is wrong with a value, or returns "".
std::function<std::string(const int&)> at_least(int min, const char* what = nullptr);
std::function<std::string(const double&)> in_range(double lo, double hi);  // [lo, hi]
// Empty means unset (the default); anything else must be one of `choices`.
std::function<std::string(const std::string&)> empty_or_one_of(std::vector<std::string> choices);
// --imgsz: 1 to kMaxImageSize pixels, each of one or two sizes. Larger sizes overflow when
// rounded to the stride, and no image of that size fits a GPU's memory.
constexpr int kMaxImageSize = 8192;
std::string image_size(const int& v);
std::string image_sizes(const std::vector<int>& v);
// --name: one folder inside --project (not empty, no '/', not "." or "..").
std::string run_name(const std::string& v);
std::string not_empty(const std::string& v);

// Where each flag given on a command line is, in order, with its value words.
struct Scan {
  std::vector<std::pair<size_t, std::vector<std::string>>> given;  // index into the specs
  bool help = false, version = false;
};
// argparse's reading of argv[1..] against `specs`: -h/--help and --version are recorded, "--"
// ends the flags; unknown flags, missing values and stray words throw UsageError naming `app`.
// Stray words are allowed after --help (it wins, as in argparse).
Scan scan(const std::vector<const FlagSpec*>& specs, int argc, const char* const* argv,
          const std::string& app);

// --help: `title`, "Usage:\n  app [flags]", then one row per flag (defaults shown), --version
// (with `version_help`) and -h, --help.
std::string help_text(const std::vector<const FlagSpec*>& specs, const std::string& title,
                      const std::string& app, const std::string& version_help);

template <class O>
std::vector<const FlagSpec*> specs_of(const std::vector<Flag<O>>& table) {
  std::vector<const FlagSpec*> out;
  for (const Flag<O>& f : table) out.push_back(&f);
  return out;
}

// A parsed command line: the values (O's defaults where not given) and the flags given, each once,
// in the order first given.
template <class O>
struct Parsed {
  O values;
  std::vector<std::string> given;
  bool help = false, version = false;
  bool was_given(const std::string& flag) const {
    for (const auto& g : given) {
      if (g == flag) return true;
    }
    return false;
  }
};

// Syntax only: words into values. Value checks are check_values's.
template <class O>
Parsed<O> parse(const std::vector<Flag<O>>& table, int argc, const char* const* argv,
                const std::string& app) {
  const Scan s = scan(specs_of(table), argc, argv, app);
  Parsed<O> out;
  out.help = s.help;
  out.version = s.version;
  if (s.help || s.version) return out;
  for (const auto& [i, words] : s.given) {
    table[i].parse(out.values, words);
    if (!out.was_given(table[i].name)) out.given.push_back(table[i].name);
  }
  return out;
}

// The first value in `o` that a flag's check refuses, as "--flag: what is wrong"; "" when none.
template <class O>
std::string first_bad_value(const std::vector<Flag<O>>& table, const O& o) {
  for (const Flag<O>& f : table) {
    if (!f.check) continue;
    const std::string what = f.check(o);
    if (!what.empty()) return "--" + f.name + ": " + what;
  }
  return "";
}

}  // namespace yolo::cli

namespace yolo {

// YOLOv5's check_img_size: rounds `imgsz` up to a multiple of `stride` (at least 2 * stride)
// with a warning; throws UsageError for sizes that are not positive.
int check_img_size(int imgsz, int stride);

}  // namespace yolo

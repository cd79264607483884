#pragma once
// Text helpers shared by logs, tables, plots and CSV files.
#include <string>
#include <vector>

namespace yolo {

// One number through a printf format: format_number("%.3g", 0.12345) == "0.123".
std::string format_number(const char* format, double value);

// What a class is called in logs, labels and tables: names[cls] when the names cover it, else
// its index.
std::string class_name(const std::vector<std::string>& names, int cls);

// `s` safe to print to a terminal: control bytes (C0 but newline and tab, DEL, and UTF-8's C1
// controls U+0080..U+009F) as \xNN, so text from a file cannot move the cursor, recolour or
// retitle the user's terminal. Other UTF-8 passes unchanged.
std::string terminal_safe(const std::string& s);

// `s` for a message that is one line: newlines and carriage returns as \n and \r, so a file or
// class name holding them cannot forge whole lines of output (terminal_safe keeps both, as
// messages may span lines). Applied to every file-derived string a one-line message prints.
std::string one_line(const std::string& s);

// `s` as a JSON string: quoted, with JSON's escapes for quotes, backslashes and control bytes.
std::string json_quote(const std::string& s);

// The candidate closest to `word` within `max_edits` (Levenshtein), for "did you mean"; "" when
// none is that close.
std::string closest_word(const std::string& word, const std::vector<std::string>& candidates,
                         size_t max_edits = 2);

// The candidates closest to `word` within `max_edits` (a swap of two neighbours counts as one
// edit), all those as close as the closest, at most `limit`: a did-you-mean names every one
// (`modle`: mode, model), as Ultralytics' does.
std::vector<std::string> close_words(const std::string& word,
                                     const std::vector<std::string>& candidates,
                                     size_t max_edits = 2, size_t limit = 3);

// "'a' or 'b'", "'a', 'b' or 'c'" for a did-you-mean.
std::string quoted_choices(const std::vector<std::string>& words);

// `s` as one word of a POSIX shell command a user may paste: unchanged when it holds only
// characters no shell treats specially, else in single quotes (a quote inside as '\''). Control
// bytes are shown escaped (one_line, terminal_safe), so a printed command is one line that
// cannot forge others.
std::string shell_word(const std::string& s);

}  // namespace yolo

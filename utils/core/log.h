#pragma once
// Minimal logging. Only the process allowed to log (rank 0, set by the distributed setup) prints
// info lines and warnings; errors always print, to stderr, prefixed with the tag (e.g. "[rank1] ").
#include <string>

namespace yolo {

void set_log_enabled(bool enabled);
bool log_enabled();
void set_log_tag(const std::string& tag);
// Info lines only (warnings still print): a library call that should stay quiet turns them off.
void set_info_enabled(bool enabled);
bool info_enabled();
void log_info(const std::string& msg);
void log_warn(const std::string& msg);
void log_error(const std::string& msg);

}  // namespace yolo

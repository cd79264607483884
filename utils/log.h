#pragma once
// Minimal logging. Only the process allowed to log (rank 0, set by the distributed setup) prints
// info lines; warnings and errors always print, to stderr.
#include <string>

namespace yolo {

void set_log_enabled(bool enabled);
bool log_enabled();
void log_info(const std::string& msg);
void log_warn(const std::string& msg);
void log_error(const std::string& msg);

}  // namespace yolo

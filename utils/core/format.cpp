#include "utils/core/format.h"

#include <cstdio>

namespace yolo {

std::string format_number(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

std::string class_name(const std::vector<std::string>& names, int cls) {
  return cls >= 0 && cls < static_cast<int>(names.size()) ? names[cls] : std::to_string(cls);
}

}  // namespace yolo

#pragma once
// Error types that map to the process exit status (docs/ARCHITECTURE.md): a UsageError (bad flag or
// value) exits 2, any other exception exits 1. Messages name the flag, file or line and what to do.
#include <stdexcept>
#include <string>

namespace yolo {

class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace yolo

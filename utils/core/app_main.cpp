#include "utils/core/app_main.h"

#include <c10/util/Exception.h>

#include <string>

#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"

namespace yolo {

// Errors are one line each (names of files and classes in them included): a newline in a name
// cannot forge a line of output.
int run_app(const char* app, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    log_error(std::string(app) + ": " + one_line(e.what()));
    return 2;
  } catch (const c10::Error& e) {
    // LibTorch messages carry a C++ backtrace after the first line; users need the first line.
    log_error(std::string(app) + ": " + e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    log_error(std::string(app) + ": " + one_line(e.what()));
    return 1;
  }
}

}  // namespace yolo

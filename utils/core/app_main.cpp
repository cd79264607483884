#include "utils/core/app_main.h"

#include <c10/util/Exception.h>

#include <new>
#include <string>

#include "utils/core/cpu_threads.h"
#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"

namespace yolo {

// Errors are one line each (names of files and classes in them included): a newline in a name
// cannot forge a line of output.
int run_app(const char* app, const std::function<int()>& body) {
  // OpenMP sized its team from the affinity mask; a CPU quota allows fewer, from the first kernel.
  init_cpu_threads();
  try {
    return body();
  } catch (const UsageError& e) {
    log_error(std::string(app) + ": " + one_line(e.what()));
    return 2;
  } catch (const c10::Error& e) {
    // LibTorch messages carry a C++ backtrace after the first line; users need the first line.
    std::string what = e.what_without_backtrace();
    const auto cut = what.find('\n');
    if (cut != std::string::npos) what.resize(cut);
    // The allocator's own words ("enforce fail at alloc_cpu.cpp ... can't allocate memory") say
    // nothing of what to change.
    if (what.find("can't allocate memory") != std::string::npos ||
        what.find("out of memory") != std::string::npos) {
      log_error(std::string(app) + ": not enough memory for this run (" + one_line(what) +
                "); lower --batch-size or --imgsz");
      return 1;
    }
    log_error(std::string(app) + ": " + one_line(what));
    return 1;
  } catch (const std::bad_alloc&) {
    log_error(std::string(app) + ": not enough memory for this run; lower --batch-size or --imgsz");
    return 1;
  } catch (const std::exception& e) {
    log_error(std::string(app) + ": " + one_line(e.what()));
    return 1;
  }
}

}  // namespace yolo

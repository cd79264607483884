#include "utils/core/log.h"

#include <atomic>
#include <iostream>
#include <mutex>

#include "utils/core/format.h"

namespace yolo {
namespace {
std::atomic<bool> g_enabled{true};
std::atomic<bool> g_info{true};
std::mutex g_mutex;
std::string g_tag;  // set once at start-up, before other threads log
}  // namespace

void set_log_enabled(bool enabled) { g_enabled = enabled; }
bool log_enabled() { return g_enabled; }
void set_info_enabled(bool enabled) { g_info = enabled; }
bool info_enabled() { return g_info; }
void set_log_tag(const std::string& tag) { g_tag = tag; }

void log_info(const std::string& msg) {
  if (!g_enabled || !g_info) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::cout << terminal_safe(msg) << std::endl;
}

void log_warn(const std::string& msg) {
  if (!g_enabled) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::cerr << "WARNING: " << terminal_safe(msg) << std::endl;
}

void log_error(const std::string& msg) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::cerr << g_tag << "ERROR: " << terminal_safe(msg) << std::endl;
}

}  // namespace yolo

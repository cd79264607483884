#include "data/download.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "utils/core/log.h"

extern char** environ;

namespace fs = std::filesystem;

namespace yolo {

int run_program(const std::vector<std::string>& argv, int timeout_s, const std::string& log_path) {
  if (argv.empty()) return 127;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return 127;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool program_available(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string p(path);
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir =
        p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

bool is_download_url(const std::string& s) {
  const bool scheme =
      s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0 || s.rfind("file://", 0) == 0;
  return scheme && s.size() > 4 && s.compare(s.size() - 4, 4, ".zip") == 0;
}

namespace {

std::string read_tail(const std::string& path) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.size() > 500) all = all.substr(all.size() - 500);
  while (!all.empty() && (all.back() == '\n' || all.back() == '\r')) all.pop_back();
  return all;
}

}  // namespace

void download_dataset(const std::string& url, const std::string& root, int timeout_s) {
  const fs::path dest = fs::path(root).parent_path();
  const std::string manual = "download " + url + " yourself and unzip it into " + dest.string() +
                             " so that " + root + " exists";
  if (!is_download_url(url)) {
    throw std::runtime_error("dataset missing at " + root +
                             " and its download entry is not a "
                             ".zip URL (scripts are not run); " +
                             "fetch the data by hand into " + root);
  }
  for (const char* tool : {"curl", "unzip"}) {
    if (!program_available(tool)) {
      throw std::runtime_error(std::string(tool) + " is not installed (apt-get install " + tool +
                               "); or " + manual);
    }
  }
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) throw std::runtime_error("cannot create " + dest.string() + ": " + ec.message());
  const std::string name = url.substr(url.rfind('/') + 1);
  const std::string tmp = (dest / ("." + name + ".part" + std::to_string(getpid()))).string();
  const std::string log = tmp + ".log";
  log_info("Downloading " + url + " to " + dest.string() + " ...");
  int rc = run_program({"curl", "-fsSL", "--retry", "2", "--connect-timeout", "20", "--noproxy",
                        "127.0.0.1,localhost", "-o", tmp, url},
                       timeout_s, log);
  if (rc != 0) {
    const std::string why = read_tail(log);
    fs::remove(tmp, ec);
    fs::remove(log, ec);
    throw std::runtime_error("could not download " + url + " (curl exit " + std::to_string(rc) +
                             (why.empty() ? "" : ": " + why) + "); offline? " + manual);
  }
  rc = run_program({"unzip", "-q", "-o", tmp, "-d", dest.string()}, timeout_s, log);
  const std::string why = read_tail(log);
  fs::remove(tmp, ec);
  fs::remove(log, ec);
  if (rc != 0) {
    throw std::runtime_error("could not unzip " + url + " (unzip exit " + std::to_string(rc) +
                             (why.empty() ? "" : ": " + why) + "); " + manual);
  }
  log_info("Dataset unpacked into " + dest.string());
}

}  // namespace yolo

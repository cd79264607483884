#pragma once
// tests/lib/asset_server.py run for one test: serves a folder on 127.0.0.1, with the misbehaving
// modes that script lists; killed on destruction.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "utils/core/paths.h"

extern char** environ;

namespace yolo::test {

class AssetServer {
 public:
  // `work` holds the port file and the request log.
  AssetServer(const std::string& dir, const std::string& work)
      : port_file_(work + "/port"), log_(work + "/requests.log") {
    std::filesystem::create_directories(work);
    const std::string script =
        (std::filesystem::path(project_root()) / "tests/lib/asset_server.py").string();
    std::vector<std::string> argv = {"python3",  script,  dir, "--port-file",
                                     port_file_, "--log", log_};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);  // clients that hang up
    if (posix_spawnp(&pid_, "python3", &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (pid_ > 0 && port_ == 0 && std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file_);
      if (!(in >> port_)) port_ = 0;
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~AssetServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  AssetServer(const AssetServer&) = delete;
  AssetServer& operator=(const AssetServer&) = delete;

  bool ok() const { return pid_ > 0 && port_ > 0; }
  // "http://127.0.0.1:PORT/<mode>/<name>"
  std::string url(const std::string& mode, const std::string& name) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + mode + "/" + name;
  }
  // The requests so far, one "<path> <Range or ->" line each.
  std::vector<std::string> requests() const {
    std::ifstream in(log_);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  std::string port_file_, log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace yolo::test

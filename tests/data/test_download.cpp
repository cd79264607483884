// `download:` zip URLs: fetched with curl from a local HTTP server and unzipped next to `path`;
// offline failures say what to fetch and where to put it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "data/dataset_config.h"
#include "data/download.h"
#include "test_helpers.h"

extern char** environ;

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::make_split;
using yolo::test::TempDir;
using yolo::test::write_text;

namespace {

int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  close(s);
  return ntohs(addr.sin_port);
}

bool port_open(int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(s);
  return ok;
}

// `python3 -m http.server` serving `dir` on 127.0.0.1, killed on destruction.
class LocalServer {
 public:
  explicit LocalServer(const std::string& dir) : port_(free_port()) {
    const std::string port = std::to_string(port_);
    std::vector<std::string> argv = {"python3", "-m",        "http.server", port,
                                     "--bind",  "127.0.0.1", "--directory", dir};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawnp(&pid_, "python3", &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pid_ > 0 && !port_open(port_) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~LocalServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool ok() const { return pid_ > 0 && port_open(port_); }
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

bool tools_present() {
  return program_available("curl") && program_available("unzip") && program_available("python3");
}

}  // namespace

TEST(Download, RunProgram) {
  EXPECT_EQ(run_program({"true"}, 5), 0);
  EXPECT_EQ(run_program({"false"}, 5), 1);
  EXPECT_EQ(run_program({"no-such-program-xyz"}, 5), 127);
  EXPECT_EQ(run_program({"sleep", "5"}, 1), 124);
  EXPECT_FALSE(program_available("no-such-program-xyz"));
  EXPECT_TRUE(is_download_url("https://x.org/a/coco128.zip"));
  EXPECT_FALSE(is_download_url("bash data/scripts/get_coco.sh"));
  EXPECT_FALSE(is_download_url("https://x.org/a.tar"));
}

TEST(Download, FetchesAndUnzipsFromLocalServer) {
  if (!tools_present()) GTEST_SKIP() << "curl, unzip or python3 missing";
  TempDir d;
  // A zip holding mini/images/{train,val} + labels, as YOLOv5's dataset zips hold coco128/.
  make_split(d / "src/mini", "train", 2, 32, 32);
  make_split(d / "src/mini", "val", 2, 32, 32);
  fs::create_directories(d / "www");
  ASSERT_EQ(run_program({"python3", "-m", "zipfile", "-c", d / "www/mini.zip", d / "src/mini"}, 30),
            0);
  LocalServer server(d / "www");
  if (!server.ok()) GTEST_SKIP() << "could not start python3 -m http.server";
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/mini.zip";
  write_text(d / "cfg/mini.yaml",
             "path: ../datasets/mini\ntrain: images/train\n"
             "val: images/val\nnames: [a, b]\ndownload: " +
                 url + "\n");
  const auto cfg = load_dataset_config(d / "cfg/mini.yaml");
  int barriers = 0;
  ensure_dataset(cfg, true, [&] { ++barriers; });
  EXPECT_EQ(barriers, 1);
  EXPECT_TRUE(fs::exists(d / "datasets/mini/images/val/im1.png"));
  EXPECT_TRUE(fs::exists(d / "datasets/mini/labels/train/im0.txt"));
  for (const auto& e : fs::directory_iterator(d / "datasets")) {
    EXPECT_EQ(e.path().filename(), "mini") << "leftover " << e.path();
  }
}

TEST(Download, OfflineFailureSaysWhatToFetch) {
  if (!program_available("curl") || !program_available("unzip")) GTEST_SKIP();
  TempDir d;
  const std::string url = "http://127.0.0.1:" + std::to_string(free_port()) + "/data.zip";
  write_text(d / "cfg/x.yaml",
             "path: ../datasets/x\ntrain: images/train\nval: images/val\n"
             "names: [a]\ndownload: " +
                 url + "\n");
  const auto cfg = load_dataset_config(d / "cfg/x.yaml");
  try {
    ensure_dataset(cfg);
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(url), std::string::npos) << msg;
    EXPECT_NE(msg.find(fs::path(d / "datasets").lexically_normal().string()), std::string::npos)
        << msg;
  }
  write_text(d / "cfg/s.yaml",
             "path: ../datasets/y\ntrain: t\nval: v\nnames: [a]\n"
             "download: bash get.sh\n");
  EXPECT_THROW(ensure_dataset(load_dataset_config(d / "cfg/s.yaml")), std::runtime_error);
}

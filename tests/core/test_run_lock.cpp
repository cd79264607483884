// A run folder's lock: held by one process, re-entered by it, refused to another with the
// holder's pid, and gone with the holder however it ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "utils/core/run_lock.h"

namespace fs = std::filesystem;

namespace {

struct TempRun {
  fs::path dir;
  TempRun() {
    std::string t = (fs::temp_directory_path() / "yolo_lock_XXXXXX").string();
    dir = ::mkdtemp(t.data());
  }
  ~TempRun() { fs::remove_all(dir); }
};

// What acquire says in a child process: "" when it got the lock, else its message.
std::string try_in_child(const fs::path& dir) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string said;
    try {
      yolo::RunLock::acquire(dir.string());
    } catch (const std::exception& e) {
      said = e.what();
    }
    if (!said.empty() && ::write(fds[1], said.data(), said.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  return out;
}

}  // namespace

TEST(RunLock, OneProcessAtATimeNamingTheHolder) {
  TempRun r;
  {
    auto lock = yolo::RunLock::acquire(r.dir.string());
    EXPECT_EQ(yolo::RunLock::acquire(r.dir.string()), lock);  // re-entered, not refused
    const std::string said = try_in_child(r.dir);
    EXPECT_NE(said.find("the run folder " + r.dir.string() + " is in use: process " +
                        std::to_string(::getpid()) + " is training in it"),
              std::string::npos)
        << said;
  }
  EXPECT_EQ(try_in_child(r.dir), "");  // released with its last holder
}

TEST(RunLock, EndsWithAKilledHolder) {
  TempRun r;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    auto lock = yolo::RunLock::acquire(r.dir.string());
    if (::write(ready[1], "x", 1) < 0) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_NE(try_in_child(r.dir).find("process " + std::to_string(holder)), std::string::npos);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_EQ(try_in_child(r.dir), "");  // no stale lock
  EXPECT_NO_THROW(yolo::RunLock::acquire(r.dir.string()));
}

TEST(RunLock, AFolderThatCannotHoldTheLockIsNamed) {
  try {
    yolo::RunLock::acquire("/nonexistent/run");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/run/.lock"), std::string::npos) << e.what();
  }
}

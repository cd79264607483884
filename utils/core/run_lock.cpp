#include "utils/core/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

namespace fs = std::filesystem;

namespace yolo {
namespace {

std::mutex g_mutex;
std::map<std::string, std::weak_ptr<RunLock>>& held() {
  static std::map<std::string, std::weak_ptr<RunLock>> locks;
  return locks;
}

std::string read_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.find_first_not_of("0123456789") == std::string::npos && !pid.empty() ? pid : "";
}

// Whether `fd` is the file at `file` now (not one a holder removed since it was opened).
bool names_this_file(int fd, const std::string& file) {
  struct stat mine = {}, there = {};
  return ::fstat(fd, &mine) == 0 && ::stat(file.c_str(), &there) == 0 &&
         mine.st_ino == there.st_ino && mine.st_dev == there.st_dev;
}

std::runtime_error lock_error(const std::string& dir, const std::string& file,
                              const std::string& pid, int err) {
  if (err == EWOULDBLOCK) {
    return std::runtime_error(
        "the run folder " + dir +
        " is in use: " + (pid.empty() ? std::string("another process") : "process " + pid) +
        " is training in it (its lock: " + file +
        "); wait for that run to end, or start a new run (without --exist-ok, or another "
        "--name)");
  }
  return std::runtime_error("cannot lock the run folder " + dir + " (" + file + ": " +
                            std::strerror(err) + ")");
}

}  // namespace

std::shared_ptr<RunLock> RunLock::acquire(const std::string& dir) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(dir, ec);
  const std::string key = ec ? dir : canon.string();
  std::lock_guard<std::mutex> guard(g_mutex);
  // A forked child inherits the map but not the lock (flock's belongs to the parent's process).
  if (auto mine = held()[key].lock(); mine && mine->pid_ == ::getpid()) return mine;
  const std::string file = (fs::path(dir) / ".lock").string();
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  // A lock file another user made, or a folder this process may not write: flock works on a
  // read-only descriptor too (the pid then stays unwritten), and a folder that cannot be
  // written fails at the run's first file, with the message that belongs there.
  if (fd < 0 && (errno == EACCES || errno == EROFS)) {
    fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
  }
  if (fd < 0) {
    throw std::runtime_error("cannot lock the run folder " + dir + ": cannot create " + file +
                             " (" + std::strerror(errno) + ")");
  }
  // The holder removes the file when it ends (below): a lock taken on a file that was removed
  // meanwhile locks nothing, so it is taken again on the file that is there now.
  for (int tries = 0; tries < 8; ++tries) {
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string pid = read_pid(fd);
      ::close(fd);
      throw lock_error(dir, file, pid, err);
    }
    if (names_this_file(fd, file)) return take(fd, file, key);
    ::close(fd);
    fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw std::runtime_error("cannot lock the run folder " + dir + ": cannot create " + file +
                               " (" + std::strerror(errno) + ")");
    }
  }
  ::close(fd);
  throw std::runtime_error(
      "cannot lock the run folder " + dir + ": " + file +
      " was replaced each time it was locked; is another program removing it?");
}

std::shared_ptr<RunLock> RunLock::take(int fd, const std::string& file, const std::string& key) {
  std::string pid = std::to_string(::getpid()) + "\n";
  // Best effort: the lock holds without the pid, and a second process then names none.
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) < 0) pid.clear();
  std::shared_ptr<RunLock> lock(new RunLock(fd, key, file, ::getpid()));
  held()[key] = lock;
  return lock;
}

RunLock::~RunLock() {
  std::lock_guard<std::mutex> guard(g_mutex);
  // Removed while still held, so that a run that ends (finished, failed or stopped) leaves no
  // lock file behind; a forked child's copy of this object removes nothing of its parent's.
  if (pid_ == ::getpid()) ::unlink(file_.c_str());
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  auto it = held().find(key_);
  if (it != held().end() && it->second.expired()) held().erase(it);
}

}  // namespace yolo

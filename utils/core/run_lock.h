#pragma once
// A run folder's lock: one training process at a time writes a run folder. Two resumes of the
// same run, or an --exist-ok start into a run that is training, would interleave their epochs in
// results.csv and overwrite each other's checkpoints. The lock is an flock on `<dir>/.lock`, so
// it ends with its process however that ends (no stale lock after a crash or SIGKILL); the file
// holds the holder's pid for the message, and is removed when the holder lets go.
#include <memory>
#include <string>
#include <utility>

namespace yolo {

class RunLock {
 public:
  // Locks `dir` (which must exist) for this process, or returns the lock this process already
  // holds on it (evolution trains its generations in one folder). Throws std::runtime_error
  // naming the folder and the holder's pid when another process holds it, or naming the folder
  // and the OS error when the lock file cannot be made. Returns nullptr, no lock, in a folder
  // this process may not write and without a lock file there: nothing can be written then, and
  // the run's first write says so.
  static std::shared_ptr<RunLock> acquire(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  RunLock(int fd, std::string key, std::string file, int pid)
      : fd_(fd), key_(std::move(key)), file_(std::move(file)), pid_(pid) {}
  static std::shared_ptr<RunLock> take(int fd, const std::string& file, const std::string& key);
  int fd_;
  std::string key_, file_;
  int pid_;
};

}  // namespace yolo

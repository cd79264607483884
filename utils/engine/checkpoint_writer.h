#pragma once
// Checkpoints written off the training thread. save() takes a snapshot of the state (a host copy
// of every tensor; on a GPU the copies are queued on the current stream, into pinned memory, and
// not waited for) and returns; one background thread waits for the copies, serialises the
// snapshot (checkpoint_bytes, the bytes save_checkpoint writes) and writes each file with
// write_file_atomic, so a kill mid-write still leaves the previous file whole. Files are written
// in the order they were asked for. A failed write is rethrown unchanged (the message names the
// file) by the caller's next save(), check() or flush(); the writes queued after it are dropped,
// as a synchronous save would never have reached them.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace yolo {

struct Checkpoint;

class CheckpointWriter {
 public:
  // Writes one file; write_file_atomic unless a test injects a slow or failing one.
  using Sink = std::function<void(const std::string& path, const std::string& bytes)>;
  explicit CheckpointWriter(Sink sink = {});
  // Finishes every queued write, so a run that ends (an exception included) never loses its
  // last.pt; an error not yet reported is logged, as a destructor cannot throw.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Snapshots `ckpt` and queues a write of it to each of `paths`. Returns once the snapshot is
  // taken; only when a write is running and another already waits does it first wait for the
  // running one, which bounds the memory to two snapshots and never drops a file (a newer
  // snapshot cannot stand in for a queued best.pt or epochN.pt).
  void save(const Checkpoint& ckpt, std::vector<std::string> paths);
  // Waits until every queued write is on disk.
  void flush();
  // Rethrows a failed background write without waiting.
  void check();
  // Writes queued or running.
  size_t pending() const;

 private:
  struct Job;
  void run();
  void rethrow_locked();

  Sink sink_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;  // waiting; at most one
  bool busy_ = false;                       // a job is being written
  bool stop_ = false;
  std::exception_ptr error_;  // the first failed write, until reported
  std::thread thread_;
};

}  // namespace yolo

#pragma once
// Downloading one URL to one file with libcurl: http(s) and file URLs, a progress bar, written
// atomically (bytes go to `<path>.part`, renamed over `path` once whole), resumed from the .part
// an interrupted attempt or an earlier run left, with a connect timeout, a stall timeout and
// retries. Builds without libcurl compile this to a function that says so.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace yolo {

// A download that did not complete: the message names the URL, why, and the path the file was
// meant for (the caller adds what a user can do instead).
class FetchError : public std::runtime_error {
 public:
  explicit FetchError(const std::string& what) : std::runtime_error(what) {}
};

struct FetchOptions {
  int connect_timeout_s = 20;
  // An attempt fails when no byte arrives for this long (a stalled server or link).
  int stall_timeout_s = 60;
  int attempts = 3;         // tries in all; each later one resumes from the .part file
  double retry_wait_s = 2;  // before the second attempt, doubled for each later one
  bool progress = true;     // a bar while bytes arrive (rank 0's log only)
  std::string label;        // what the bar calls the file (default: its name)
};

// An flock on `file` (made when missing) while this process downloads `what`: another process
// asking for the same waits, saying so, then finds what the first fetched. Released, and the file
// removed, with the object; a killed holder's lock ends with its process (the file stays, and
// is locked again by the next one).
class DownloadLock {
 public:
  DownloadLock(const std::string& file, const std::string& what);
  ~DownloadLock();
  DownloadLock(const DownloadLock&) = delete;
  DownloadLock& operator=(const DownloadLock&) = delete;

 private:
  std::string file_;
  int fd_ = -1;
};

// The options with YOLO_DOWNLOAD_TIMEOUT (stall seconds) and YOLO_DOWNLOAD_ATTEMPTS applied.
FetchOptions fetch_options_from_env();

// True when this build can download (it was built with libcurl).
bool fetch_supported();

// Downloads `url` to `path` (its folder is made). Returns the bytes written. Throws FetchError on
// a refusal (HTTP 4xx: not retried), a failure after every attempt, or a body shorter than the
// size the server announced; the .part file is kept after a failure so that the next call
// resumes it, and removed after a refusal.
int64_t fetch_file(const std::string& url, const std::string& path,
                   const FetchOptions& options = FetchOptions());

}  // namespace yolo

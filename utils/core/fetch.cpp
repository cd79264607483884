#include "utils/core/fetch.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/core/progress.h"

#ifdef YOLO_WITH_CURL
#include <curl/curl.h>

#include <mutex>
#endif

namespace fs = std::filesystem;

namespace yolo {

namespace {

int env_int(const char* name, int fallback, int lo) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < lo || n > 1000000) {
    log_warn(std::string(name) + "='" + v + "' is not a whole number >= " + std::to_string(lo) +
             "; using " + std::to_string(fallback));
    return fallback;
  }
  return static_cast<int>(n);
}

}  // namespace

DownloadLock::DownloadLock(const std::string& file, const std::string& what) : file_(file) {
  bool said = false;
  for (;;) {
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;  // an unwritable folder: nothing can be downloaded into it either
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (!said)
        log_info("waiting for another process downloading " + what + " (lock " + file + ")");
      said = true;
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
    // The holder before removes the file as it lets go: a lock on a file no longer at `file`
    // guards nothing, so it is taken again on the file there now.
    struct stat held = {};
    struct stat now = {};
    if (::fstat(fd_, &held) == 0 && ::stat(file.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      return;
    }
    ::close(fd_);
  }
}

DownloadLock::~DownloadLock() {
  if (fd_ < 0) return;
  ::unlink(file_.c_str());  // while still held: a waiter then finds it gone and locks afresh
  ::close(fd_);
}

FetchOptions fetch_options_from_env() {
  FetchOptions o;
  o.stall_timeout_s = env_int("YOLO_DOWNLOAD_TIMEOUT", o.stall_timeout_s, 1);
  o.attempts = env_int("YOLO_DOWNLOAD_ATTEMPTS", o.attempts, 1);
  return o;
}

#ifndef YOLO_WITH_CURL

bool fetch_supported() { return false; }

int64_t fetch_file(const std::string& url, const std::string& path, const FetchOptions&) {
  throw FetchError("cannot download " + url +
                   ": this build has no libcurl (install "
                   "libcurl4-openssl-dev and rebuild); put the file at " +
                   path + " yourself");
}

#else

bool fetch_supported() { return true; }

namespace {

// One attempt's state, shared with libcurl's callbacks.
struct Transfer {
  CURL* curl = nullptr;
  FILE* out = nullptr;
  int64_t offset = 0;    // bytes already in the .part file when the attempt started
  int64_t received = 0;  // bytes of this attempt written
  bool checked_resume = false;
  int write_errno = 0;
  const FetchOptions* options = nullptr;
  std::string label;
  std::unique_ptr<ProgressBar> bar;
  int64_t bar_total = 0;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->checked_resume) {
    t->checked_resume = true;
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    // A server without ranges sends the whole file again: start the .part over.
    if (t->offset > 0 && code == 200) {
      if (ftruncate(fileno(t->out), 0) != 0 || std::fseek(t->out, 0, SEEK_SET) != 0) {
        t->write_errno = errno;
        return 0;
      }
      t->offset = 0;
    }
  }
  const size_t n = size * count;
  if (std::fwrite(data, 1, n, t->out) != n) {
    t->write_errno = errno ? errno : EIO;
    return 0;
  }
  t->received += static_cast<int64_t>(n);
  return n;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->options->progress || total <= 0) return 0;
  const int64_t all = t->offset + total, done = t->offset + now;
  if (!t->bar || t->bar_total != all) {
    t->bar = std::make_unique<ProgressBar>(all, -1, 5);
    t->bar->count_bytes();
    t->bar_total = all;
  }
  t->bar->update(done, t->label);
  return 0;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// kRestart: the .part cannot be continued (the server ignores ranges, or the file changed);
// kOffline: the host name does not resolve, which waiting does not mend.
enum class Outcome { kDone, kRetry, kRestart, kRefused, kOffline, kFatal };

struct AttemptResult {
  Outcome outcome;
  std::string why;
};

// One request for `url` into `part`: continued with a range from what `part` holds when
// `resume`, else from the start.
AttemptResult attempt(const std::string& url, const std::string& part, const FetchOptions& o,
                      const std::string& label, bool resume) {
  std::error_code ec;
  Transfer t;
  t.options = &o;
  t.label = label;
  t.offset = resume && fs::exists(part, ec) ? static_cast<int64_t>(fs::file_size(part, ec)) : 0;
  if (ec) t.offset = 0;
  t.out = std::fopen(part.c_str(), resume ? "ab" : "wb");
  if (!t.out) return {Outcome::kFatal, "cannot write " + part + ": " + std::strerror(errno)};
  t.curl = curl_easy_init();
  if (!t.curl) {
    std::fclose(t.out);
    return {Outcome::kFatal, "libcurl could not start"};
  }
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(t.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(t.curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(t.curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(t.curl, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(t.curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(t.curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(t.curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(t.curl, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(t.curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(t.curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(o.connect_timeout_s));
  curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.stall_timeout_s));
  curl_easy_setopt(t.curl, CURLOPT_NOPROXY, "127.0.0.1,localhost,::1");
  curl_easy_setopt(t.curl, CURLOPT_USERAGENT, "yolo-cpp/" YOLO_VERSION);
  if (t.offset > 0) curl_easy_setopt(t.curl, CURLOPT_RESUME_FROM_LARGE, curl_off_t{t.offset});
  const CURLcode rc = curl_easy_perform(t.curl);
  long code = 0;
  curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &code);
  curl_off_t announced = -1;
  curl_easy_getinfo(t.curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
  curl_easy_cleanup(t.curl);
  const bool flushed = std::fflush(t.out) == 0 && fsync(fileno(t.out)) == 0;
  std::fclose(t.out);
  std::string why = error[0] ? std::string(error) : curl_easy_strerror(rc);
  if (t.bar) t.bar->close(label, 0, rc == CURLE_OK);  // how far it got, on a line of its own
  if (rc == CURLE_OPERATION_TIMEDOUT && t.received > 0) {
    why = "stalled: no data for " + std::to_string(o.stall_timeout_s) + " s after " +
          std::to_string(t.received) + " bytes (YOLO_DOWNLOAD_TIMEOUT sets the wait)";
  } else if (rc == CURLE_OPERATION_TIMEDOUT && code != 0) {  // answered, then no body
    why = "stalled: no data for " + std::to_string(o.stall_timeout_s) +
          " s (YOLO_DOWNLOAD_TIMEOUT sets the wait)";
  } else if (rc == CURLE_PARTIAL_FILE && announced > 0) {
    why = "the server sent " + std::to_string(t.received) + " of the " +
          std::to_string(static_cast<int64_t>(announced)) +
          " bytes it announced, then closed the connection";
  }
  if (rc == CURLE_OK) {
    if (!flushed) return {Outcome::kFatal, "cannot write " + part + ": " + std::strerror(errno)};
    return {Outcome::kDone, ""};
  }
  if (rc == CURLE_WRITE_ERROR && t.write_errno != 0) {
    return {Outcome::kFatal, "cannot write " + part + ": " + std::strerror(t.write_errno)};
  }
  if (rc == CURLE_HTTP_RETURNED_ERROR) {
    // 416: the .part is not a prefix the server can continue (a changed file): start over.
    if (code == 416 && t.offset > 0) return {Outcome::kRestart, why};
    if (code >= 400 && code < 500) return {Outcome::kRefused, "HTTP " + std::to_string(code)};
  }
  if (rc == CURLE_RANGE_ERROR || rc == CURLE_BAD_DOWNLOAD_RESUME) return {Outcome::kRestart, why};
  if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY) {
    return {Outcome::kOffline, why + " (no network or name service here, or a typo in the URL)"};
  }
  if (rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT ||
      rc == CURLE_FILE_COULDNT_READ_FILE || rc == CURLE_REMOTE_FILE_NOT_FOUND) {
    return {Outcome::kRefused, why};
  }
  return {Outcome::kRetry, why};
}

}  // namespace

int64_t fetch_file(const std::string& url, const std::string& path, const FetchOptions& o) {
  global_init();
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) throw FetchError("cannot create " + target.parent_path().string() + ": " + ec.message());
  const std::string part = path + ".part";
  const std::string label = o.label.empty() ? target.filename().string() : o.label;
  log_info("Downloading " + url + " to " + path + " ...");
  const int attempts = std::max(1, o.attempts);
  double wait = o.retry_wait_s;
  std::string why, restarted;  // the last failure; why the .part was started over, if it was
  bool resume = true;
  for (int i = 1; i <= attempts; ++i) {
    const AttemptResult r = attempt(url, part, o, "Downloading " + label, resume);
    if (r.outcome == Outcome::kDone) {
      fs::rename(part, target, ec);
      if (ec) throw FetchError("cannot move " + part + " to " + path + ": " + ec.message());
      return static_cast<int64_t>(fs::file_size(target, ec));
    }
    if (r.outcome == Outcome::kRefused) {
      fs::remove(part, ec);
      throw FetchError("could not download " + url + " (" + r.why + ") to " + path);
    }
    if (r.outcome == Outcome::kFatal) {
      throw FetchError("could not download " + url + " to " + path + ": " + r.why);
    }
    if (r.outcome == Outcome::kOffline) {
      if (fs::exists(part, ec) && fs::file_size(part, ec) == 0) fs::remove(part, ec);
      throw FetchError("could not download " + url + " to " + path + ": " + r.why +
                       "; not retried");
    }
    if (r.outcome == Outcome::kRestart && restarted.empty()) {
      // The request for the rest was answered with the whole file or refused: the same attempt
      // starts over from byte 0, and no later one asks for a range.
      restarted = r.why;
      resume = false;
      log_warn("the server cannot resume " + url + " (" + r.why + "); starting it over");
      --i;
      continue;
    }
    why = r.why;
    if (i < attempts) {
      log_warn("download of " + url + " failed (" + why + "); retrying in " +
               format_number("%.3g", wait) + " s (attempt " + std::to_string(i + 1) + " of " +
               std::to_string(attempts) + ")");
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      wait *= 2;
    }
  }
  // A .part only a server with ranges can continue is worth keeping for the next run.
  const bool kept = resume && fs::exists(part, ec) && fs::file_size(part, ec) > 0;
  if (!kept) fs::remove(part, ec);
  throw FetchError(
      "could not download " + url + " to " + path + " after " + std::to_string(attempts) +
      (attempts == 1 ? " attempt (" : " attempts (") + why + ")" +
      (restarted.empty() ? ""
                         : "; the server cannot resume a download (" + restarted +
                               "), so each attempt after the first started over") +
      (kept ? "; the part received is kept in " + part + " and resumed next time" : ""));
}

#endif

}  // namespace yolo

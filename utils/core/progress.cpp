#include "utils/core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "utils/core/format.h"
#include "utils/core/log.h"

namespace yolo {

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

namespace {

// Bytes as MB to three significant digits, as tqdm's sizes: 0.31, 4.17, 12.3, 123.
std::string megabytes_3(int64_t bytes) {
  const double mb = bytes / 1e6;
  return format_number(mb < 10 ? "%.2f" : mb < 100 ? "%.1f" : "%.0f", mb);
}

}  // namespace

std::string format_progress(const std::string& desc, int64_t done, int64_t total, double elapsed,
                            int64_t images, bool bytes) {
  total = std::max<int64_t>(total, 1);
  done = std::clamp<int64_t>(done, 0, total);
  const double frac = static_cast<double>(done) / total;
  // Ten cells, each in eighths, as tqdm draws them.
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(frac * 80);
  std::string bar;
  for (int c = 0; c < 10; ++c) {
    const int fill = std::clamp(eighths - 8 * c, 0, 8);
    bar += fill == 8 ? "█" : fill == 0 ? " " : kEighths[fill];
  }
  const double rate = elapsed > 0 ? done / elapsed : 0;
  char tail[160];
  const std::string remaining = rate > 0 ? format_duration((total - done) / rate) : "?";
  if (bytes) {
    std::snprintf(tail, sizeof(tail), "%.2f MB/s", rate / 1e6);
  } else if (rate >= 1 || rate == 0) {
    std::snprintf(tail, sizeof(tail), "%.2fit/s", rate);
  } else {
    std::snprintf(tail, sizeof(tail), "%.2fs/it", 1 / rate);
  }
  std::string out = desc + (desc.empty() ? "" : ": ");
  char head[16];
  std::snprintf(head, sizeof(head), "%3.0f%%|", std::floor(frac * 100));
  std::string count = std::to_string(done) + "/" + std::to_string(total);
  if (bytes) count = megabytes_3(done) + "/" + megabytes_3(total) + " MB";
  out +=
      head + bar + "| " + count + " [" + format_duration(elapsed) + "<" + remaining + ", " + tail;
  if (images > 0 && elapsed > 0) {
    char ips[32];
    std::snprintf(ips, sizeof(ips), ", %.1f img/s", images / elapsed);
    out += ips;
  }
  return out + "]";
}

ProgressBar::ProgressBar(int64_t total, int tty, double plain_every)
    : total_(std::max<int64_t>(total, 1)),
      tty_(tty < 0 ? ::isatty(STDOUT_FILENO) : tty > 0),
      plain_every_(plain_every) {}

void ProgressBar::show(const std::string& line, bool final) {
  if (!log_enabled()) return;
  if (tty_) {
    std::printf("\r\033[K%s%s", terminal_safe(line).c_str(), final ? "\n" : "");
    std::fflush(stdout);
  } else {
    log_info(line);
  }
}

void ProgressBar::update(int64_t done, const std::string& desc, int64_t images) {
  done_ = done;
  if (tty_) {
    show(format_progress(desc, done, total_, clock_.seconds(), images, bytes_), false);
  } else if (done >= next_plain_ && done < total_ &&
             clock_.seconds() - last_plain_ >= plain_every_) {
    // A log keeps a trace of long bars without a line per batch.
    show(format_progress(desc, done, total_, clock_.seconds(), images, bytes_), false);
    next_plain_ = done + std::max<int64_t>(1, total_ / 10);
    last_plain_ = clock_.seconds();
  }
}

void ProgressBar::close(const std::string& desc, int64_t images, bool finished) {
  if (closed_) return;
  closed_ = true;
  const int64_t done = finished ? std::max(done_, total_) : done_;
  show(format_progress(desc, done, total_, clock_.seconds(), images, bytes_), true);
}

}  // namespace yolo

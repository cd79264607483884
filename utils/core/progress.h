#pragma once
// Progress as YOLOv5's tqdm bar shows it: "<desc> 45%|████▌     | 9/20 [00:04<00:05, 2.10it/s,
// 33.6 img/s]". On a terminal the line is redrawn in place; otherwise (a CI log, `> file`) it is
// printed as plain lines, at most one per tenth of the work and per `plain_every` seconds, then
// the final state, so logs stay short. Prints only where logging is enabled (rank 0 under DDP).
#include <cstdint>
#include <string>

#include "utils/core/stopwatch.h"

namespace yolo {

// The bar's text for `done` of `total` after `elapsed` seconds; `images` > 0 adds images/s.
// `bytes`: done and total are bytes, shown as tqdm's download bars show them (MB, MB/s).
std::string format_progress(const std::string& desc, int64_t done, int64_t total, double elapsed,
                            int64_t images = 0, bool bytes = false);

// "01:05" or "1:02:03", as tqdm.
std::string format_duration(double seconds);

class ProgressBar {
 public:
  // tty < 0: ask isatty(stdout); 0 or 1 force plain lines or redrawing.
  explicit ProgressBar(int64_t total, int tty = -1, double plain_every = 10);
  // Shows `done` of the total (desc is the text before the bar, e.g. the losses).
  void update(int64_t done, const std::string& desc, int64_t images = 0);
  // Ends the bar's line (on a terminal) and prints the final state once: all done, or with
  // `finished` false where the work stopped (a failed download).
  void close(const std::string& desc, int64_t images = 0, bool finished = true);
  // Counts bytes: shown in MB with MB/s.
  void count_bytes() { bytes_ = true; }
  void set_total(int64_t total) { total_ = total > 0 ? total : 1; }
  double elapsed() const { return clock_.seconds(); }

 private:
  void show(const std::string& line, bool final);
  int64_t total_, done_ = 0, next_plain_ = 0;
  bool tty_, closed_ = false, bytes_ = false;
  double plain_every_, last_plain_ = 0;
  Stopwatch clock_;
};

}  // namespace yolo

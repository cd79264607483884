#pragma once
// Time per phase of a training step that tells the truth on a GPU. A host stopwatch charges the
// GPU's queued work to whichever call happens to wait for it, so on CUDA the clock records an
// event at each phase boundary on the current stream and sums the GPU time between them as the
// GPU passes them (checked without waiting when a step starts) and when flushed (events mode), or
// synchronises the device at each boundary (sync mode: exact, but it stalls the pipeline). On the
// CPU the phases are plain host time.
#include <c10/core/Device.h>

#include <cstddef>
#include <memory>
#include <string>

namespace yolo {

class PhaseClock {
 public:
  enum class Mode { kHost, kSync, kEvents };
  PhaseClock(Mode mode, const c10::Device& device);
  ~PhaseClock();
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

  // Events on CUDA, host time elsewhere.
  static Mode default_mode(const c10::Device& device);
  // "host", "sync" or "events" (a UsageError names `flag` otherwise); events and sync need CUDA.
  static Mode parse(const std::string& text, const std::string& flag);
  Mode mode() const { return mode_; }

  // Starts a step's first phase.
  void start();
  // Ends the current phase: its time is added to *phase (at once, or when flushed), and the next
  // phase starts.
  void lap(double* phase);
  // Adds every pending event interval to its phase, waiting for the GPU to reach them (the one
  // call that waits: at an epoch's end, not inside it).
  void flush();
  // Phase boundaries recorded and not yet summed (events mode; 0 otherwise).
  size_t pending() const;

 private:
  struct Impl;
  Mode mode_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolo

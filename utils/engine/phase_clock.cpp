#include "utils/engine/phase_clock.h"

#include <utility>
#include <vector>

#include "utils/core/errors.h"
#include "utils/core/stopwatch.h"

#ifdef YOLO_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace yolo {

struct PhaseClock::Impl {
  c10::Device device;
  Stopwatch clock;
#ifdef YOLO_WITH_CUDA
  // Phase boundaries not yet summed: the event that ends a phase and where its time goes. The
  // first event of each step has no phase.
  std::vector<std::pair<std::shared_ptr<at::cuda::CUDAEvent>, double*>> pending;
  static constexpr size_t kCollectAfter = 512;  // boundaries before a step's start sums done ones
  std::shared_ptr<at::cuda::CUDAEvent> record() {
    c10::cuda::CUDAGuard guard(device);
    auto e = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    e->record();
    return e;
  }
  // Adds each pending interval to its phase, in order: with `wait`, all of them (waiting for the
  // GPU to reach them); else only those whose end the GPU has passed (event queries, no wait).
  // The last boundary summed stays as the start of the next interval.
  void collect(bool wait) {
    size_t k = 1;
    for (; k < pending.size(); ++k) {
      auto& [event, phase] = pending[k];
      if (wait) {
        event->synchronize();
      } else if (!event->query()) {
        break;
      }
      // A step's start has no phase: the previous step ended before it.
      if (phase != nullptr) *phase += pending[k - 1].first->elapsed_time(*event) / 1000.0;
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(k - 1));
  }
#endif
  explicit Impl(const c10::Device& d) : device(d) {}
};

PhaseClock::PhaseClock(Mode mode, const c10::Device& device)
    : mode_(mode), impl_(std::make_unique<Impl>(device)) {
  if (mode_ != Mode::kHost && !device.is_cuda()) mode_ = Mode::kHost;
#ifndef YOLO_WITH_CUDA
  mode_ = Mode::kHost;
#endif
}

PhaseClock::~PhaseClock() = default;

PhaseClock::Mode PhaseClock::default_mode(const c10::Device& device) {
  return device.is_cuda() ? Mode::kEvents : Mode::kHost;
}

PhaseClock::Mode PhaseClock::parse(const std::string& text, const std::string& flag) {
  if (text == "host") return Mode::kHost;
  if (text == "sync") return Mode::kSync;
  if (text == "events") return Mode::kEvents;
  throw UsageError(flag + ": expected host, sync or events, got '" + text + "'");
}

void PhaseClock::start() {
#ifdef YOLO_WITH_CUDA
  if (mode_ == Mode::kEvents) {
    impl_->pending.emplace_back(impl_->record(), nullptr);
    // Long epochs: bounded memory from the boundaries the GPU has passed, never a wait for it.
    if (impl_->pending.size() > Impl::kCollectAfter) impl_->collect(/*wait=*/false);
    return;
  }
  if (mode_ == Mode::kSync) c10::cuda::device_synchronize();
#endif
  impl_->clock.restart();
}

void PhaseClock::lap(double* phase) {
#ifdef YOLO_WITH_CUDA
  if (mode_ == Mode::kEvents) {
    impl_->pending.emplace_back(impl_->record(), phase);
    return;
  }
  if (mode_ == Mode::kSync) c10::cuda::device_synchronize();
#endif
  *phase += impl_->clock.seconds();
  impl_->clock.restart();
}

void PhaseClock::flush() {
#ifdef YOLO_WITH_CUDA
  impl_->collect(/*wait=*/true);
#endif
}

size_t PhaseClock::pending() const {
#ifdef YOLO_WITH_CUDA
  return impl_->pending.size();
#else
  return 0;
#endif
}

}  // namespace yolo

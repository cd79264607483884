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
  std::shared_ptr<at::cuda::CUDAEvent> record() {
    c10::cuda::CUDAGuard guard(device);
    auto e = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    e->record();
    return e;
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
    if (impl_->pending.size() > 4096) flush();  // long epochs: bounded memory
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
  auto& p = impl_->pending;
  for (size_t k = 1; k < p.size(); ++k) {
    if (p[k].second == nullptr) continue;  // a step's start: the previous step ended before it
    p[k].first->synchronize();
    *p[k].second += p[k - 1].first->elapsed_time(*p[k].first) / 1000.0;
  }
  // Keep the last boundary: a phase may still end after it.
  if (!p.empty()) p.erase(p.begin(), p.end() - 1);
  if (!p.empty() && p.back().second != nullptr) p.back().second = nullptr;
#endif
}

}  // namespace yolo

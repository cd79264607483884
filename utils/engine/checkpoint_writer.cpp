#include "utils/engine/checkpoint_writer.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <unordered_map>

#include "utils/core/fs_atomic.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/log.h"

namespace yolo {

struct CheckpointWriter::Job {
  Checkpoint ckpt;  // host tensors only
  std::vector<std::string> paths;
  std::vector<c10::Event> ready;  // one per device: its host copies are done
  // The device the copies came from, current on the writer thread while it handles the job: a
  // CUDA call from a thread with no current device opens a context on GPU 0 (with --device 1 or
  // on DDP ranks other than 0, one more context on GPU 0 for every process).
  std::optional<c10::Device> device;
};

namespace {

// Host copies of a checkpoint's tensors, taken on the training thread, so that the next steps
// may change the weights while the copies are written.
class Snapshot {
 public:
  at::Tensor tensor(const at::Tensor& t) {
    if (!t.defined()) return t;
    // A tensor met twice stays one storage, as the pickler writes it for the live tensors.
    const auto seen = memo_.find(t.unsafeGetTensorImpl());
    if (seen != memo_.end()) return seen->second;
    const at::Tensor src = t.detach();
    at::Tensor copy;
    if (src.is_cpu()) {
      copy = src.clone(at::MemoryFormat::Contiguous);
    } else if (src.is_cuda()) {
      // Queued on the device's current stream, after the step that produced the weights and
      // before any later one changes them; the writer waits for the event recorded below.
      copy = at::empty(src.sizes(), src.options().device(at::kCPU).pinned_memory(true));
      copy.copy_(src, /*non_blocking=*/true);
      if (std::find(devices_.begin(), devices_.end(), src.device()) == devices_.end()) {
        devices_.push_back(src.device());
      }
    } else {
      copy = src.cpu().contiguous();
    }
    memo_.emplace(t.unsafeGetTensorImpl(), copy);
    return copy;
  }

  std::map<std::string, at::Tensor> tensors(const std::map<std::string, at::Tensor>& m) {
    std::map<std::string, at::Tensor> out;
    for (const auto& [k, t] : m) out.emplace(k, tensor(t));
    return out;
  }

  c10::IValue value(const c10::IValue& v) {
    return map_tensors(v, [this](const at::Tensor& t) { return tensor(t); });
  }

  // The first device the copies came from (none for a CPU state).
  std::optional<c10::Device> device() const {
    if (devices_.empty()) return std::nullopt;
    return devices_.front();
  }

  // Marks, on each device's current stream, the point after its copies.
  std::vector<c10::Event> record() const {
    std::vector<c10::Event> events;
    for (const c10::Device& d : devices_) {
      events.emplace_back(d.type());
      events.back().record(c10::impl::getDeviceGuardImpl(d.type())->getStream(d));
    }
    return events;
  }

 private:
  std::unordered_map<const c10::TensorImpl*, at::Tensor> memo_;
  std::vector<c10::Device> devices_;
};

void write_job(const CheckpointWriter::Sink& sink, const Checkpoint& ckpt,
               const std::vector<std::string>& paths, const std::vector<c10::Event>& ready) {
  // Polled rather than synchronised: the same call in every LibTorch, and no spinning core.
  for (const c10::Event& e : ready) {
    while (!e.query()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::string bytes = checkpoint_bytes(ckpt);
  for (const std::string& p : paths) sink(p, bytes);
}

}  // namespace

CheckpointWriter::CheckpointWriter(Sink sink) : sink_(std::move(sink)) {
  if (!sink_) sink_ = write_file_atomic;
  // Ctrl-C and SIGTERM go to the training thread, whose handler asks for the stop and the save;
  // the writer thread starts with them blocked (a thread inherits its creator's mask).
  sigset_t stop_signals, old;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // run() returns once the queue is empty
  if (!error_) return;
  try {
    std::rethrow_exception(error_);
  } catch (const std::exception& e) {
    log_error(std::string("checkpoint not saved: ") + e.what());
  } catch (...) {
    log_error("checkpoint not saved: unknown error");
  }
}

void CheckpointWriter::rethrow_locked() {
  if (!error_) return;
  std::exception_ptr e = error_;
  error_ = nullptr;  // reported once
  std::rethrow_exception(e);
}

void CheckpointWriter::save(const Checkpoint& ckpt, std::vector<std::string> paths) {
  {
    std::unique_lock<std::mutex> lk(mu_);
    rethrow_locked();
    cv_.wait(lk, [&] { return queue_.empty(); });  // a failed write empties it too
    rethrow_locked();
  }
  auto job = std::make_unique<Job>();
  Snapshot snap;
  job->ckpt.epoch = ckpt.epoch;
  job->ckpt.best_fitness = ckpt.best_fitness;
  job->ckpt.model = snap.tensors(ckpt.model);
  job->ckpt.train_model = snap.tensors(ckpt.train_model);
  job->ckpt.last_opt_step = ckpt.last_opt_step;
  job->ckpt.optimizer = snap.value(ckpt.optimizer);
  job->ckpt.ema_updates = ckpt.ema_updates;
  job->ckpt.opt = ckpt.opt;
  job->ckpt.hyp = ckpt.hyp;
  job->ckpt.model_yaml = ckpt.model_yaml;
  job->ckpt.nc = ckpt.nc;
  job->ckpt.names = ckpt.names;
  job->ckpt.date = ckpt.date.empty() ? now_iso8601() : ckpt.date;  // the time of the state
  job->ready = snap.record();
  job->device = snap.device();
  job->paths = std::move(paths);
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void CheckpointWriter::flush() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
  rethrow_locked();
}

void CheckpointWriter::check() {
  std::lock_guard<std::mutex> lk(mu_);
  rethrow_locked();
}

size_t CheckpointWriter::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.size() + (busy_ ? 1 : 0);
}

void CheckpointWriter::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    std::unique_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    cv_.notify_all();  // room for the next save
    std::exception_ptr err;
    {
      // Constructed with its device (or none) rather than reset later: GCC 12 cannot see that
      // the guard's unset optional is never read, and warns.
      const c10::OptionalDeviceGuard device(job->device ? c10::optional<c10::Device>(*job->device)
                                                        : c10::optional<c10::Device>());
      try {
        write_job(sink_, job->ckpt, job->paths, job->ready);
      } catch (...) {
        err = std::current_exception();
      }
      job.reset();  // pinned copies go back to their device's allocator under the same device
    }
    std::deque<std::unique_ptr<Job>> dropped;
    lk.lock();
    busy_ = false;
    if (err) {
      if (!error_) error_ = err;
      dropped.swap(queue_);
    }
    lk.unlock();
    cv_.notify_all();
    dropped.clear();
    lk.lock();
  }
}

}  // namespace yolo

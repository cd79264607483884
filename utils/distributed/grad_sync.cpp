#include "utils/distributed/grad_sync.h"

#include <torch/torch.h>

#include <chrono>
#include <stdexcept>

#include "utils/core/runtime/torch_compat.h"
#include "utils/core/stopwatch.h"

namespace yolo {

GradSync::GradSync(std::shared_ptr<ProcessGroup> pg, std::vector<at::Tensor> params,
                   int64_t bucket_cap_bytes, int64_t first_bucket_cap_bytes)
    : pg_(std::move(pg)), params_(std::move(params)) {
  const size_t n = params_.size();
  bucket_of_.assign(n, 0);
  offset_of_.assign(n, 0);
  seen_.assign(n, 0);
  // Reverse order; a new bucket when the cap is reached or the dtype/device changes.
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t k = n; k-- > 0;) {
    const at::Tensor& p = params_[k];
    if (!p.requires_grad()) throw std::invalid_argument("GradSync: a parameter needs no grad");
    const int64_t cap = groups.size() <= 1 ? first_bucket_cap_bytes : bucket_cap_bytes;
    const bool new_bucket = groups.empty() || bytes >= cap ||
                            params_[groups.back().front()].scalar_type() != p.scalar_type() ||
                            params_[groups.back().front()].device() != p.device();
    if (new_bucket) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    stats_.bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }
  for (auto& g : groups) {
    Bucket b;
    int64_t numel = 0;
    for (size_t k : g) {
      bucket_of_[k] = buckets_.size();
      offset_of_[k] = static_cast<size_t>(numel);
      numel += params_[k].numel();
    }
    b.params = g;
    b.pending = static_cast<int>(g.size());
    b.flat = torch::zeros({numel}, params_[g.front()].options().requires_grad(false));
    buckets_.push_back(std::move(b));
  }
  for (size_t k = 0; k < n; ++k) {
    hooks_.push_back(params_[k].register_hook([this, k](const at::Tensor& g) { on_grad(k, g); }));
  }
}

GradSync::~GradSync() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

void GradSync::set_sync(bool enabled) {
  sync_ = enabled;
  reset_buckets();
}

void GradSync::reset_buckets() {
  for (auto& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.work.reset();
  }
  std::fill(seen_.begin(), seen_.end(), 0);
  next_launch_ = 0;
}

// Parameter k's place in its bucket, laid out as the parameter (and so its gradient) is, e.g.
// channels-last: copies in and out are then plain, and the copy back is one multi-tensor kernel.
at::Tensor GradSync::slot_of(size_t k) const {
  const at::Tensor& p = params_[k];
  const Bucket& b = buckets_[bucket_of_[k]];
  const at::Tensor flat = b.flat.slice(0, offset_of_[k], offset_of_[k] + p.numel());
  if (p.is_non_overlapping_and_dense()) return flat.as_strided(p.sizes(), p.strides());
  return flat.view(p.sizes());
}

void GradSync::on_grad(size_t k, const at::Tensor& grad) {
  if (!sync_ || seen_[k]) return;
  torch::NoGradGuard no_grad;
  const at::Tensor& p = params_[k];
  Bucket& b = buckets_[bucket_of_[k]];
  at::Tensor slot = slot_of(k);
  // The hook runs before autograd adds `grad` to .grad: reduce what .grad will hold, which
  // includes the batches accumulated without sync.
  if (p.grad().defined()) {
    torch::add_out(slot, p.grad(), grad);
  } else {
    slot.copy_(grad);
  }
  seen_[k] = 1;
  if (--b.pending == 0) launch_ready();
}

void GradSync::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_++];
    b.work = pg_->allreduce_sum_async(b.flat);
  }
}

void GradSync::finish() {
  if (!sync_) return;
  torch::NoGradGuard no_grad;
  // Parameters backward did not reach (unused this step) contribute what .grad holds, or zeros.
  for (size_t i = next_launch_; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    for (size_t k : b.params) {
      if (seen_[k]) continue;
      at::Tensor slot = slot_of(k);
      if (params_[k].grad().defined()) {
        slot.copy_(params_[k].grad());
      } else {
        slot.zero_();
      }
      seen_[k] = 1;
    }
    b.pending = 0;
  }
  launch_ready();
  const Stopwatch wait;
  for (auto& b : buckets_) {
    b.work->wait();
    b.work.reset();
  }
  if (!buckets_.empty() && buckets_.front().flat.is_cpu()) stats_.wait_seconds += wait.seconds();
  const double inv = 1.0 / pg_->size();
  std::vector<at::Tensor> grads, averages;  // one multi-tensor copy instead of one per parameter
  for (auto& b : buckets_) {
    b.flat.mul_(inv);
    for (size_t k : b.params) {
      at::Tensor& p = params_[k];
      at::Tensor avg = slot_of(k);
      if (p.grad().defined()) {
        grads.push_back(p.grad());
        averages.push_back(avg);
      } else {
        p.mutable_grad() = avg.clone();
      }
    }
  }
  compat::foreach_copy_(grads, averages);
  ++stats_.syncs;
  reset_buckets();
}

}  // namespace yolo

#include "utils/distributed/grad_sync.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "utils/core/log.h"
#include "utils/core/runtime/torch_compat.h"
#include "utils/core/stopwatch.h"

namespace yolo {

GradSync::GradSync(std::shared_ptr<ProcessGroup> pg, std::vector<at::Tensor> params,
                   int64_t bucket_cap_bytes, int64_t first_bucket_cap_bytes,
                   std::vector<std::string> names)
    : pg_(std::move(pg)),
      params_(std::move(params)),
      names_(std::move(names)),
      cap_(bucket_cap_bytes),
      first_cap_(first_bucket_cap_bytes) {
  const size_t n = params_.size();
  int64_t total = 0;
  for (const at::Tensor& p : params_) {
    if (!p.requires_grad()) throw std::invalid_argument("GradSync: a parameter needs no grad");
    total += p.numel() * static_cast<int64_t>(p.element_size());
  }
  if (cap_ <= 0) cap_ = std::clamp<int64_t>(total / 8, 1 << 20, 25 << 20);
  excluded_.assign(n, 0);
  build_buckets();
  for (size_t k = 0; k < n; ++k) {
    hooks_.push_back(params_[k].register_hook([this, k](const at::Tensor& g) { on_grad(k, g); }));
  }
}

// Reverse order; a new bucket when the cap is reached or the dtype/device changes. Parameters used
// on some ranks only go into a last, late bucket; those used nowhere into none.
void GradSync::build_buckets() {
  const size_t n = params_.size();
  bucket_of_.assign(n, 0);
  offset_of_.assign(n, 0);
  seen_.assign(n, 0);
  buckets_.clear();
  stats_.bytes = 0;
  std::vector<char> late(n, 0);
  for (size_t k : partly_used_) late[k] = 1;
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t k = n; k-- > 0;) {
    if (excluded_[k] || late[k]) continue;
    const at::Tensor& p = params_[k];
    const int64_t cap = groups.size() <= 1 ? first_cap_ : cap_;
    const bool new_bucket = groups.empty() || bytes >= cap ||
                            params_[groups.back().front()].scalar_type() != p.scalar_type() ||
                            params_[groups.back().front()].device() != p.device();
    if (new_bucket) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }
  const size_t on_time = groups.size();
  for (size_t k = n; k-- > 0;) {
    if (!late[k]) continue;
    const at::Tensor& p = params_[k];
    if (groups.size() == on_time ||
        params_[groups.back().front()].scalar_type() != p.scalar_type() ||
        params_[groups.back().front()].device() != p.device()) {
      groups.emplace_back();
    }
    groups.back().push_back(k);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    Bucket b;
    int64_t numel = 0;
    for (size_t k : groups[g]) {
      bucket_of_[k] = buckets_.size();
      offset_of_[k] = static_cast<size_t>(numel);
      numel += params_[k].numel();
      stats_.bytes += params_[k].numel() * static_cast<int64_t>(params_[k].element_size());
    }
    b.params = groups[g];
    b.pending = static_cast<int>(groups[g].size());
    b.late = g >= on_time;
    b.flat = torch::zeros({numel}, params_[groups[g].front()].options().requires_grad(false));
    buckets_.push_back(std::move(b));
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
  if (!sync_ || seen_[k] || excluded_[k]) return;
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
  // Nothing launches from backward before the ranks know which parameters each of them uses.
  if (--b.pending == 0 && probed_) launch_ready(false);
}

void GradSync::launch_ready(bool with_late) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0 &&
         (with_late || !buckets_[next_launch_].late)) {
    Bucket& b = buckets_[next_launch_++];
    b.work = pg_->allreduce_sum_async(b.flat);
  }
}

void GradSync::finish() {
  if (!sync_) return;
  torch::NoGradGuard no_grad;
  const bool probing = !probed_;
  if (probing) find_unused(seen_);
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
  launch_ready(true);
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
  for (size_t k : unused_) params_[k].mutable_grad().reset();
  ++stats_.syncs;
  if (probing) {
    for (size_t k : unused_) excluded_[k] = 1;
    probed_ = true;
    if (!unused_.empty() || !partly_used_.empty()) build_buckets();
  }
  reset_buckets();
}

namespace {
std::string name_list(const std::vector<size_t>& ks, const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < ks.size() && i < 10; ++i) {
    s += (i ? ", " : "") +
         (ks[i] < names.size() ? names[ks[i]] : "parameter " + std::to_string(ks[i]));
  }
  if (ks.size() > 10) s += " and " + std::to_string(ks.size() - 10) + " more";
  return s;
}
}  // namespace

// One all-reduce of how many ranks reached each parameter, before any bucket of this step.
void GradSync::find_unused(const std::vector<char>& used) {
  if (params_.empty()) return;
  at::Tensor counts = torch::zeros({static_cast<int64_t>(params_.size())}, torch::kFloat);
  float* c = counts.data_ptr<float>();
  for (size_t k = 0; k < used.size(); ++k) c[k] = used[k] ? 1.f : 0.f;
  at::Tensor on_device = counts.to(params_.front().device());
  pg_->allreduce_sum(on_device);
  counts = on_device.cpu();
  c = counts.data_ptr<float>();
  const float world = static_cast<float>(pg_->size());
  for (size_t k = 0; k < params_.size(); ++k) {
    if (c[k] < 0.5f) {
      unused_.push_back(k);
    } else if (c[k] < world - 0.5f) {
      partly_used_.push_back(k);
    }
  }
  if (!unused_.empty()) {
    log_warn("DDP: " + std::to_string(unused_.size()) +
             " parameters get no gradient on any rank and are left without one (momentum and "
             "weight decay do not move them): " +
             name_list(unused_, names_));
  }
  if (!partly_used_.empty()) {
    log_warn("DDP: " + std::to_string(partly_used_.size()) +
             " parameters are unused on some ranks (reduced after backward, as zeros there): " +
             name_list(partly_used_, names_));
  }
}

}  // namespace yolo

#include "utils/engine/optimizer_step.h"

#include <torch/torch.h>

#include <cmath>
#include <map>

#include "utils/core/runtime/torch_compat.h"
#include "utils/engine/musgd.h"
#include "utils/engine/optim.h"

namespace yolo {

namespace {
using StateKey = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
StateKey param_key(const at::Tensor& p) { return compat::optimizer_state_key<StateKey>(p); }

bool skip_on_host(const std::optional<at::Tensor>& found_inf) {
  return found_inf && found_inf->defined() && found_inf->item<float>() != 0.0f;
}

// tensors[i] * factor, out of place.
std::vector<at::Tensor> scaled(const std::vector<at::Tensor>& tensors, const at::Tensor& factor) {
#if TORCH_VERSION_MAJOR >= 2
  return at::_foreach_mul(tensors, factor);
#else
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t * factor);
  return out;
#endif
}

// Every gradient zeroed where found_inf is 1, with no host read: one masked fill over all of them
// seen as one flat tensor (a dense gradient, channels-last too, is a run of its storage), then one
// multi-tensor copy back. What a skipped step leaves is then finite, so keep = 0 can cancel it.
void zero_grads_on_inf(std::vector<at::Tensor> grads, const at::Tensor& found_inf) {
  std::vector<at::Tensor> views;
  std::vector<int64_t> sizes;
  for (const auto& g : grads) {
    if (g.is_contiguous() || g.is_contiguous(at::MemoryFormat::ChannelsLast)) {
      views.push_back(g.as_strided({g.numel()}, {1}, g.storage_offset()));
      sizes.push_back(g.numel());
    } else {
      g.masked_fill_(found_inf.gt(0), 0);
    }
  }
  if (views.empty()) return;
  const at::Tensor flat = torch::cat(views).masked_fill_(found_inf.gt(0), 0);
  const std::vector<at::Tensor> parts = flat.split_with_sizes(sizes);
  compat::foreach_copy_(views, parts);
}

// Adam and AdamW share their state's shape; AdamW decays the weights, Adam the gradients.
struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
};

AdamHyper adam_hyper(torch::optim::OptimizerOptions& o) {
  if (auto* a = dynamic_cast<torch::optim::AdamOptions*>(&o)) {
    TORCH_CHECK(!a->amsgrad(), "Adam with amsgrad is not supported");
    return {a->lr(),  std::get<0>(a->betas()), std::get<1>(a->betas()),
            a->eps(), a->weight_decay(),       false};
  }
  auto& w = dynamic_cast<torch::optim::AdamWOptions&>(o);
  TORCH_CHECK(!w.amsgrad(), "AdamW with amsgrad is not supported");
  return {w.lr(), std::get<0>(w.betas()), std::get<1>(w.betas()), w.eps(), w.weight_decay(), true};
}

// The per-parameter state of Adam or AdamW (same fields, distinct types).
template <typename State>
State& adam_state(torch::optim::Optimizer& opt, const at::Tensor& p) {
  auto& slot = opt.state()[param_key(p)];
  if (!slot) {
    auto s = std::make_unique<State>();
    s->step(0);
    s->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
    s->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
    slot = std::move(s);
  }
  return static_cast<State&>(*slot);
}

// The fused kernels read parameter, gradient and state as flat arrays, so they need the same
// strides. Autograd gives gradients their parameter's layout; a gradient assembled elsewhere (a
// DataParallel gather) is copied into it.
const at::Tensor& grad_like_param(const at::Tensor& p) {
  if (!p.grad().strides().equals(p.strides())) {
    p.mutable_grad() = torch::empty_like(p, at::MemoryFormat::Preserve).copy_(p.grad());
  }
  return p.grad();
}

struct AdamBucket {
  std::vector<at::Tensor> params, grads, exp_avg, exp_avg_sq;
};
}  // namespace

at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({});
  const std::vector<at::Tensor> norms = compat::foreach_norm(grads);
  // As torch::nn::utils::clip_grad_norm_: the norm of the norms, then a clamped coefficient.
  at::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  const at::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  compat::foreach_mul_(grads, coef);
  return total;
}

OptimizerStep::OptimizerStep(torch::optim::Optimizer& optimizer, std::string name, Kernel kernel)
    : opt_(optimizer), name_(std::move(name)), kernel_(kernel) {
  TORCH_CHECK(name_ == "SGD" || name_ == "Adam" || name_ == "AdamW" || name_ == "MuSGD",
              "optimizer '", name_, "' not supported (SGD, Adam, AdamW, MuSGD)");
#ifndef YOLO_HAS_FUSED_OPTIMIZERS
  kernel_ = Kernel::kForeach;
#endif
  if (name_ == "MuSGD") kernel_ = Kernel::kForeach;  // no fused kernel; it skips on the device
}

OptimizerStep::Kernel OptimizerStep::default_kernel(const c10::Device& device) {
#ifdef YOLO_HAS_FUSED_OPTIMIZERS
  if (device.is_cuda()) return Kernel::kFused;
#endif
  return Kernel::kForeach;
}

void OptimizerStep::step(const std::optional<at::Tensor>& found_inf) {
  torch::NoGradGuard no_grad;
  // MuSGD skips AMP's inf/NaN step on the device; the other foreach updates read it (the CPU's).
  at::Tensor keep;
  if (name_ == "MuSGD" && found_inf && found_inf->defined()) {
    std::vector<at::Tensor> grads;
    for (auto& group : opt_.param_groups()) {
      for (const auto& p : group.params()) {
        if (p.grad().defined()) grads.push_back(p.grad());
      }
    }
    zero_grads_on_inf(grads, *found_inf);
    keep = 1 - found_inf->to(torch::kFloat);
  } else if (kernel_ == Kernel::kForeach && skip_on_host(found_inf)) {
    return;
  }
  for (size_t g = 0; g < opt_.param_groups().size(); ++g) {
    auto& group = opt_.param_groups()[g];
    if (name_ == "MuSGD") {
      musgd_group(group, group_kind(g) == 1, keep);
    } else if (name_ == "SGD") {
      sgd_group(group, found_inf);
    } else {
      adam_group(group, found_inf);
    }
  }
  if (kernel_ == Kernel::kFused && name_ != "SGD" && found_inf && found_inf->defined()) {
    if (!skipped_.defined()) skipped_ = torch::zeros_like(*found_inf);
    skipped_.add_(*found_inf);
  }
}

// LibTorch's SGD: d = g + wd * p; buf = m * buf + (1 - dampening) * d; d += m * buf (nesterov)
// or d = buf; p -= lr * d. Buffers start at zero, which with dampening 0 (YOLOv5's) gives
// LibTorch's first-step copy of d exactly, and lets the fused kernel skip any step.
void OptimizerStep::sgd_group(torch::optim::OptimizerParamGroup& group,
                              const std::optional<at::Tensor>& found_inf) {
  auto& o = static_cast<torch::optim::SGDOptions&>(group.options());
  TORCH_CHECK(o.dampening() == 0, "SGD with dampening is not supported");
  const double wd = o.weight_decay(), momentum = o.momentum(), lr = o.lr();
  std::vector<at::Tensor> params, grads, bufs;
  for (const auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    params.push_back(p);
    grads.push_back(kernel_ == Kernel::kFused ? grad_like_param(p) : p.grad());
    if (momentum == 0) continue;
    auto& slot = opt_.state()[param_key(p)];
    if (!slot) slot = std::make_unique<torch::optim::SGDParamState>();
    auto& s = static_cast<torch::optim::SGDParamState&>(*slot);
    if (!s.momentum_buffer().defined()) {
      s.momentum_buffer(torch::zeros_like(p, at::MemoryFormat::Preserve));
    }
    bufs.push_back(s.momentum_buffer());
  }
  if (params.empty()) return;
#ifdef YOLO_HAS_FUSED_OPTIMIZERS
  if (kernel_ == Kernel::kFused) {
    at::_fused_sgd_(params, grads, bufs, wd, momentum, lr, 0.0, o.nesterov(), false, false,
                    std::nullopt, found_inf);
    return;
  }
#endif
  std::vector<at::Tensor> d = wd != 0 ? at::_foreach_add(grads, params, wd) : grads;
  if (momentum != 0) {
    at::_foreach_mul_(bufs, momentum);
    at::_foreach_add_(bufs, d, 1.0);
    d = o.nesterov() ? at::_foreach_add(d, bufs, momentum) : bufs;
  }
  at::_foreach_add_(params, d, -1 * lr);
}

// Ultralytics' MuSGD.step for one group: the Muon step of its 2-D and 4-D parameters (the
// weights' group alone) at kMuonLrFactor x lr, then for all a Nesterov SGD step whose weight decay
// reads the parameters after the Muon step, at kMuonSgdLrFactor x lr for the Muon group.
void OptimizerStep::musgd_group(torch::optim::OptimizerParamGroup& group, bool muon,
                                const at::Tensor& keep) {
  auto& o = static_cast<torch::optim::SGDOptions&>(group.options());
  const double wd = o.weight_decay(), momentum = o.momentum();
  double lr = o.lr();
  std::vector<at::Tensor> params, grads, bufs, muon_params, muon_grads, muon_bufs;
  for (const auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& slot = opt_.state()[param_key(p)];
    if (!slot) slot = std::make_unique<MuSGDParamState>();
    auto& s = static_cast<MuSGDParamState&>(*slot);
    if (!s.momentum_buffer().defined()) {
      s.momentum_buffer(torch::zeros_like(p, at::MemoryFormat::Preserve));
    }
    params.push_back(p);
    grads.push_back(p.grad());
    bufs.push_back(s.momentum_buffer());
    if (muon && (p.dim() == 2 || p.dim() == 4)) {
      if (!s.muon_buffer().defined())
        s.muon_buffer(torch::zeros_like(p, at::MemoryFormat::Preserve));
      muon_params.push_back(p);
      muon_grads.push_back(p.grad());
      muon_bufs.push_back(s.muon_buffer());
    }
  }
  if (params.empty()) return;
  // keep (1, or 0 on AMP's skipped step) scales every change: with 1 the step is the same as
  // without it, bit for bit; with 0 parameters and buffers stay as they were.
  const bool skippable = keep.defined();
  if (!muon_params.empty()) {
    std::vector<at::Tensor> u =
        muon_updates(muon_grads, muon_bufs, momentum, skippable ? &keep : nullptr);
    if (skippable) compat::foreach_mul_(u, keep);
    at::_foreach_add_(muon_params, u, -lr * kMuonLrFactor);
    lr *= kMuonSgdLrFactor;
  }
  std::vector<at::Tensor> d = wd != 0 ? at::_foreach_add(grads, params, wd) : grads;
  if (skippable) {
    d = scaled(d, keep);
    compat::foreach_mul_(bufs, keep * momentum + (1 - keep));
  } else {
    at::_foreach_mul_(bufs, momentum);
  }
  at::_foreach_add_(bufs, d, 1.0);
  d = o.nesterov() ? at::_foreach_add(d, bufs, momentum) : bufs;
  if (skippable) d = scaled(d, keep);
  at::_foreach_add_(params, d, -lr);
}

// LibTorch's Adam/AdamW, parameters bucketed by their step count (all equal in training).
void OptimizerStep::adam_group(torch::optim::OptimizerParamGroup& group,
                               const std::optional<at::Tensor>& found_inf) {
  const AdamHyper h = adam_hyper(group.options());
  std::map<int64_t, AdamBucket> buckets;
  for (const auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto put = [&](auto& s) {
      s.step(s.step() + 1);
      AdamBucket& b = buckets[s.step()];
      b.params.push_back(p);
      b.grads.push_back(kernel_ == Kernel::kFused ? grad_like_param(p) : p.grad());
      b.exp_avg.push_back(s.exp_avg());
      b.exp_avg_sq.push_back(s.exp_avg_sq());
    };
    if (h.decoupled) {
      put(adam_state<torch::optim::AdamWParamState>(opt_, p));
    } else {
      put(adam_state<torch::optim::AdamParamState>(opt_, p));
    }
  }
  for (auto& [step, b] : buckets) {
#ifdef YOLO_HAS_FUSED_OPTIMIZERS
    if (kernel_ == Kernel::kFused) {
      at::Tensor t =
          torch::full({}, static_cast<double>(step),
                      torch::TensorOptions(torch::kFloat32).device(b.params[0].device()));
      if (skipped_.defined()) t.sub_(skipped_);
      const std::vector<at::Tensor> steps(b.params.size(), t);
      if (h.decoupled) {
        at::_fused_adamw_(b.params, b.grads, b.exp_avg, b.exp_avg_sq, {}, steps, h.lr, h.beta1,
                          h.beta2, h.weight_decay, h.eps, false, false, std::nullopt, found_inf);
      } else {
        at::_fused_adam_(b.params, b.grads, b.exp_avg, b.exp_avg_sq, {}, steps, h.lr, h.beta1,
                         h.beta2, h.weight_decay, h.eps, false, false, std::nullopt, found_inf);
      }
      continue;
    }
#endif
    const double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
    std::vector<at::Tensor> g = b.grads;
    if (h.weight_decay != 0) {
      if (h.decoupled) {
        at::_foreach_mul_(b.params, 1 - h.lr * h.weight_decay);
      } else {
        g = at::_foreach_add(b.grads, b.params, h.weight_decay);
      }
    }
    at::_foreach_mul_(b.exp_avg, h.beta1);
    at::_foreach_add_(b.exp_avg, g, 1 - h.beta1);
    at::_foreach_mul_(b.exp_avg_sq, h.beta2);
    at::_foreach_addcmul_(b.exp_avg_sq, g, g, 1 - h.beta2);
    std::vector<at::Tensor> denom = at::_foreach_sqrt(b.exp_avg_sq);
    at::_foreach_div_(denom, std::sqrt(bc2));
    at::_foreach_add_(denom, h.eps);
    at::_foreach_addcdiv_(b.params, b.exp_avg, denom, -h.lr / bc1);
  }
}

void OptimizerStep::zero_grad() {
  for (auto& group : opt_.param_groups()) {
    for (auto& p : group.params()) p.mutable_grad().reset();
  }
}

void OptimizerStep::sync_state() {
  if (!skipped_.defined()) return;
  const auto skipped = static_cast<int64_t>(skipped_.item<float>());
  if (skipped == 0) return;
  for (auto& group : opt_.param_groups()) {
    for (const auto& p : group.params()) {
      auto it = opt_.state().find(param_key(p));
      if (it == opt_.state().end()) continue;
      if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
        a->step(a->step() - skipped);
      } else if (auto* w = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
        w->step(w->step() - skipped);
      }
    }
  }
  skipped_.zero_();
}

}  // namespace yolo

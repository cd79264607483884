#include "utils/engine/optim.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "models/yolo.h"
#include "utils/core/runtime/torch_compat.h"
#include "utils/engine/musgd.h"

namespace yolo {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

using StateKey = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
StateKey param_key(const torch::Tensor& p) { return compat::optimizer_state_key<StateKey>(p); }
}  // namespace

ParamGroups split_param_groups(const torch::nn::Module& model) {
  ParamGroups g;
  for (const auto& kv : model.named_parameters(true)) {
    const std::string& n = kv.key();
    if (ends_with(n, ".bias") || n == "bias") {
      g.bias.push_back(kv.value());
      g.bias_names.push_back(n);
    } else if (ends_with(n, "bn.weight")) {
      g.bn.push_back(kv.value());
      g.bn_names.push_back(n);
    } else {
      g.weight.push_back(kv.value());
      g.weight_names.push_back(n);
    }
  }
  return g;
}

ParamGroups take_params(ParamGroups& g, const std::vector<std::string>& prefixes) {
  const auto taken = [&](const std::string& n) {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&](const std::string& p) { return n.rfind(p, 0) == 0; });
  };
  ParamGroups out;
  const auto split = [&](std::vector<torch::Tensor>& params, std::vector<std::string>& names,
                         std::vector<torch::Tensor>& out_params,
                         std::vector<std::string>& out_names) {
    std::vector<torch::Tensor> keep_params;
    std::vector<std::string> keep_names;
    for (size_t i = 0; i < params.size(); ++i) {
      const bool t = taken(names[i]);
      (t ? out_params : keep_params).push_back(params[i]);
      (t ? out_names : keep_names).push_back(names[i]);
    }
    params = std::move(keep_params);
    names = std::move(keep_names);
  };
  split(g.bias, g.bias_names, out.bias, out.bias_names);
  split(g.weight, g.weight_names, out.weight, out.weight_names);
  split(g.bn, g.bn_names, out.bn, out.bn_names);
  return out;
}

ParamGroups take_classification_branches(ParamGroups& g, const DetectionModelImpl& model) {
  const std::string head = "model." + std::to_string(model.model->size() - 1) + ".";
  return take_params(g, {head + "cv3.", head + "one2one_cv3."});
}

namespace {
// Groups in YOLOv5's order: biases and BN weights without decay, other weights with it; then, for
// MuSGD, the boosted ones in the same order at group_lr_factor's lr.
template <typename Opt, typename OptOptions>
std::unique_ptr<torch::optim::Optimizer> grouped(const ParamGroups& g, const OptOptions& base,
                                                 double decay,
                                                 const ParamGroups* boosted = nullptr) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  const auto add = [&](const ParamGroups& p, double lr_factor) {
    auto options = [&](double wd) {
      auto o = std::make_unique<OptOptions>(base);
      o->weight_decay(wd);
      o->lr(base.lr() * lr_factor);
      return o;
    };
    groups.emplace_back(p.bias, options(base.weight_decay()));
    groups.emplace_back(p.weight, options(decay));
    groups.emplace_back(p.bn, options(base.weight_decay()));
  };
  add(g, 1.0);
  if (boosted) add(*boosted, group_lr_factor(3));
  return std::make_unique<Opt>(std::move(groups), base);
}
}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                        const ParamGroups& g, double lr,
                                                        double momentum, double decay,
                                                        const ParamGroups& boosted) {
  using namespace torch::optim;
  const auto betas = std::make_tuple(momentum, 0.999);
  if (name == "SGD") {
    return grouped<SGD>(g, SGDOptions(lr).momentum(momentum).nesterov(true), decay);
  }
  if (name == "MuSGD") {  // SGD's options and groups; the update is OptimizerStep's
    return grouped<SGD>(g, SGDOptions(lr).momentum(momentum).nesterov(true), decay, &boosted);
  }
  if (name == "Adam") return grouped<Adam>(g, AdamOptions(lr).betas(betas), decay);
  if (name == "AdamW") {
    return grouped<AdamW>(g, AdamWOptions(lr).betas(betas).weight_decay(0.0), decay);
  }
  throw std::runtime_error("optimizer '" + name + "' not supported (SGD, Adam, AdamW, MuSGD)");
}

ModelOptimizer make_model_optimizer(const std::string& name, const DetectionModelImpl& model,
                                    double lr, double momentum, double weight_decay) {
  ModelOptimizer m;
  m.groups = split_param_groups(model);
  if (name == "MuSGD") m.boosted = take_classification_branches(m.groups, model);
  m.optimizer = make_optimizer(name, m.groups, lr, momentum, weight_decay, m.boosted);
  return m;
}

double group_lr(const torch::optim::Optimizer& opt, size_t group) {
  return opt.param_groups().at(group).options().get_lr();
}

void set_group_lr(torch::optim::Optimizer& opt, size_t group, double lr) {
  opt.param_groups().at(group).options().set_lr(lr);
}

void set_group_momentum(torch::optim::Optimizer& opt, size_t group, double m) {
  auto& o = opt.param_groups().at(group).options();
  if (auto* s = dynamic_cast<torch::optim::SGDOptions*>(&o)) {
    s->momentum(m);
  } else if (auto* a = dynamic_cast<torch::optim::AdamOptions*>(&o)) {
    a->betas(std::make_tuple(m, std::get<1>(a->betas())));
  } else if (auto* w = dynamic_cast<torch::optim::AdamWOptions*>(&o)) {
    w->betas(std::make_tuple(m, std::get<1>(w->betas())));
  }
}

double group_momentum(const torch::optim::Optimizer& opt, size_t group) {
  const auto& o = opt.param_groups().at(group).options();
  if (auto* s = dynamic_cast<const torch::optim::SGDOptions*>(&o)) return s->momentum();
  if (auto* a = dynamic_cast<const torch::optim::AdamOptions*>(&o)) return std::get<0>(a->betas());
  if (auto* w = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return std::get<0>(w->betas());
  return 0.0;
}

std::function<double(double)> lr_lambda(bool cos_lr, int epochs, double lrf) {
  if (cos_lr) {
    return
        [epochs, lrf](double x) { return ((1 - std::cos(x * M_PI / epochs)) / 2) * (lrf - 1) + 1; };
  }
  return [epochs, lrf](double x) { return (1 - x / epochs) * (1.0 - lrf) + lrf; };
}

double interp2(double x, double x0, double x1, double y0, double y1) {
  if (x <= x0) return y0;
  if (x >= x1) return y1;
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

c10::IValue optimizer_state(const torch::optim::Optimizer& opt, const std::string& name) {
  using c10::IValue;
  c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
  c10::impl::GenericList groups(c10::AnyType::get());
  int64_t index = 0;
  for (size_t gi = 0; gi < opt.param_groups().size(); ++gi) {
    const auto& group = opt.param_groups()[gi];
    c10::impl::GenericDict gd(c10::StringType::get(), c10::AnyType::get());
    gd.insert("lr", group.options().get_lr());
    gd.insert("momentum", group_momentum(opt, gi));
    // A plain list: a typed int list pickles as torch.jit's build_intlist, which Python's
    // torch.load(weights_only=True) refuses.
    c10::impl::GenericList ids(c10::AnyType::get());
    for (const auto& p : group.params()) {
      ids.push_back(index);
      auto it = opt.state().find(param_key(p));
      if (it != opt.state().end()) {
        c10::impl::GenericDict ps(c10::StringType::get(), c10::AnyType::get());
        if (name == "SGD") {
          auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
          if (s.momentum_buffer().defined()) ps.insert("momentum_buffer", s.momentum_buffer());
        } else if (name == "MuSGD") {
          auto& s = static_cast<const MuSGDParamState&>(*it->second);
          if (s.momentum_buffer().defined()) ps.insert("momentum_buffer", s.momentum_buffer());
          if (s.muon_buffer().defined()) ps.insert("muon_buffer", s.muon_buffer());
        } else {
          auto put = [&](const auto& s) {
            ps.insert("step", s.step());
            ps.insert("exp_avg", s.exp_avg());
            ps.insert("exp_avg_sq", s.exp_avg_sq());
          };
          if (name == "Adam") {
            put(static_cast<const torch::optim::AdamParamState&>(*it->second));
          } else {
            put(static_cast<const torch::optim::AdamWParamState&>(*it->second));
          }
        }
        state.insert(index, ps);
      }
      ++index;
    }
    gd.insert("params", ids);
    groups.push_back(gd);
  }
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("state", state);
  out.insert("param_groups", groups);
  out.insert("type", name);
  return out;
}

std::string optimizer_state_type(const c10::IValue& v) {
  if (!v.isGenericDict()) return "";
  const auto d = v.toGenericDict();
  if (!d.contains("type") || !d.at("type").isString()) return "";
  return d.at("type").toStringRef();
}

void load_optimizer_state(torch::optim::Optimizer& opt, const std::string& name,
                          const c10::IValue& v) {
  TORCH_CHECK(v.isGenericDict(), "optimizer state must be a dict");
  const auto d = v.toGenericDict();
  TORCH_CHECK(d.contains("type") && d.at("type").toStringRef() == name,
              "the checkpoint's optimizer is ",
              d.contains("type") ? d.at("type").toStringRef() : std::string("unknown"), ", not ",
              name, " (pass the same --optimizer)");
  const auto groups = d.at("param_groups").toList();
  const auto state = d.at("state").toGenericDict();
  TORCH_CHECK(groups.size() == opt.param_groups().size(), "optimizer state has ", groups.size(),
              " parameter groups, expected ", opt.param_groups().size());
  int64_t index = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto gd = groups.get(gi).toGenericDict();
    auto& group = opt.param_groups()[gi];
    const c10::IValue& ids = gd.at("params");  // older checkpoints hold a typed int list
    TORCH_CHECK(
        (ids.isIntList() ? ids.toIntList().size() : ids.toList().size()) == group.params().size(),
        "optimizer state group ", gi, " has another number of parameters");
    group.options().set_lr(gd.at("lr").toDouble());
    set_group_momentum(opt, gi, gd.at("momentum").toDouble());
    for (const auto& p : group.params()) {
      if (state.contains(index)) {
        const auto ps = state.at(index).toGenericDict();
        auto check = [&](const at::Tensor& t) {
          TORCH_CHECK(t.sizes() == p.sizes(), "optimizer state for parameter ", index,
                      " has shape ", t.sizes(), ", expected ", p.sizes());
          return torch::empty_like(p).copy_(t);  // the parameter's device, dtype and layout
        };
        if (name == "SGD") {
          auto s = std::make_unique<torch::optim::SGDParamState>();
          if (ps.contains("momentum_buffer")) {
            s->momentum_buffer(check(ps.at("momentum_buffer").toTensor()));
          }
          opt.state()[param_key(p)] = std::move(s);
        } else if (name == "MuSGD") {
          auto s = std::make_unique<MuSGDParamState>();
          if (ps.contains("momentum_buffer")) {
            s->momentum_buffer(check(ps.at("momentum_buffer").toTensor()));
          }
          if (ps.contains("muon_buffer")) s->muon_buffer(check(ps.at("muon_buffer").toTensor()));
          opt.state()[param_key(p)] = std::move(s);
        } else if (name == "Adam") {
          auto s = std::make_unique<torch::optim::AdamParamState>();
          s->step(ps.at("step").toInt());
          s->exp_avg(check(ps.at("exp_avg").toTensor()));
          s->exp_avg_sq(check(ps.at("exp_avg_sq").toTensor()));
          opt.state()[param_key(p)] = std::move(s);
        } else {
          auto s = std::make_unique<torch::optim::AdamWParamState>();
          s->step(ps.at("step").toInt());
          s->exp_avg(check(ps.at("exp_avg").toTensor()));
          s->exp_avg_sq(check(ps.at("exp_avg_sq").toTensor()));
          opt.state()[param_key(p)] = std::move(s);
        }
      }
      ++index;
    }
  }
}

}  // namespace yolo

#include "models/anchor_free_detect.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

namespace yolo {

namespace {
torch::nn::Conv2d out_conv(int c1, int c2) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c2, 1));
}
Conv dw_conv(int c1, int c2, int k) { return Conv(c1, c2, k, 1, -1, std::gcd(c1, c2)); }

// One level's box and class branches.
std::pair<Chain, Chain> branches(int x, int c2, int c3, int nc, int reg_max, bool legacy) {
  Chain box = make_chain(Conv(x, c2, 3), Conv(c2, c2, 3), out_conv(c2, 4 * reg_max));
  Chain cls = legacy
                  ? make_chain(Conv(x, c3, 3), Conv(c3, c3, 3), out_conv(c3, nc))
                  : make_chain(make_chain(dw_conv(x, x, 3), Conv(x, c3, 1)),
                               make_chain(dw_conv(c3, c3, 3), Conv(c3, c3, 1)), out_conv(c3, nc));
  return {box, cls};
}

void copy_values(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto src = from.named_parameters();
  for (auto& kv : to.named_parameters()) kv.value().copy_(src[kv.key()]);
  const auto src_buffers = from.named_buffers();
  for (auto& kv : to.named_buffers()) kv.value().copy_(src_buffers[kv.key()]);
}
}  // namespace

AnchorFreeDetectImpl::AnchorFreeDetectImpl(int nc_, int reg_max_, bool legacy,
                                           const std::vector<int>& ch, bool end2end)
    : nc(nc_), nl(static_cast<int>(ch.size())), reg_max(reg_max_), no(nc_ + 4 * reg_max_) {
  const int c2 = std::max({16, ch[0] / 4, 4 * reg_max});
  const int c3 = std::max(ch[0], std::min(nc, 100));
  stride = torch::zeros({nl});
  const auto add_branches = [&](const std::string& prefix) {
    auto box = register_module(prefix + "cv2", torch::nn::ModuleList());
    auto cls = register_module(prefix + "cv3", torch::nn::ModuleList());
    for (int x : ch) {
      auto [b, c] = branches(x, c2, c3, nc, reg_max, legacy);
      box->push_back(b);
      cls->push_back(c);
    }
    return std::pair{box, cls};
  };
  std::tie(cv2, cv3) = add_branches("");
  if (reg_max > 1) dfl = register_module("dfl", DFL(reg_max));
  if (end2end) {  // Ultralytics deep-copies the branches: both start from the same values
    std::tie(one2one_cv2, one2one_cv3) = add_branches("one2one_");
    copy_values(*cv2, *one2one_cv2);
    copy_values(*cv3, *one2one_cv3);
    heads_ = Heads::kBoth;
  }
}

void AnchorFreeDetectImpl::select(Heads heads) {
  if (heads != Heads::kOne2Many && !has_one2one()) {
    throw std::runtime_error("this model has no one-to-one (end-to-end) head");
  }
  heads_ = heads;
}

std::vector<torch::Tensor> AnchorFreeDetectImpl::forward_levels(std::vector<torch::Tensor> x) {
  const auto run = [&](torch::nn::ModuleList box, torch::nn::ModuleList cls,
                       const std::vector<torch::Tensor>& in) {
    std::vector<torch::Tensor> out(nl);
    for (int i = 0; i < nl; ++i) {
      out[i] = torch::cat(
          {box[i]->as<ChainImpl>()->forward(in[i]), cls[i]->as<ChainImpl>()->forward(in[i])}, 1);
    }
    return out;
  };
  if (heads_ == Heads::kOne2One) return run(one2one_cv2, one2one_cv3, x);
  std::vector<torch::Tensor> out = run(cv2, cv3, x);
  if (heads_ == Heads::kBoth) {
    if (is_training()) {
      for (auto& xi : x) xi = xi.detach();
    }
    const std::vector<torch::Tensor> o2o = run(one2one_cv2, one2one_cv3, x);
    out.insert(out.end(), o2o.begin(), o2o.end());
  }
  return out;
}

std::pair<torch::Tensor, torch::Tensor> make_anchor_points(
    const std::vector<std::array<int64_t, 2>>& sizes, const std::vector<float>& strides,
    const torch::TensorOptions& options) {
  std::vector<torch::Tensor> points, level_strides;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto [ny, nx] = sizes[i];
    const torch::Tensor sx = torch::arange(nx, options) + 0.5;
    const torch::Tensor sy = torch::arange(ny, options) + 0.5;
    const auto yx = torch::meshgrid({sy, sx}, "ij");
    points.push_back(torch::stack({yx[1], yx[0]}, -1).view({-1, 2}));
    level_strides.push_back(torch::full({ny * nx, 1}, strides[i], options));
  }
  return {torch::cat(points), torch::cat(level_strides)};
}

void AnchorFreeDetectImpl::update_anchors(const std::vector<torch::Tensor>& raw) {
  std::vector<int64_t> shape;
  std::vector<std::array<int64_t, 2>> sizes;
  for (const auto& r : raw) {
    shape.insert(shape.end(), {r.size(2), r.size(3)});
    sizes.push_back({r.size(2), r.size(3)});
  }
  const auto opts = torch::TensorOptions().dtype(raw[0].scalar_type()).device(raw[0].device());
  if (shape == shape_ && anchors_.defined() && anchors_.device() == raw[0].device() &&
      anchors_.scalar_type() == raw[0].scalar_type()) {
    return;
  }
  const auto s = stride.to(torch::kCPU);
  std::vector<float> st(s.data_ptr<float>(), s.data_ptr<float>() + nl);
  auto [points, strides] = make_anchor_points(sizes, st, opts);
  anchors_ = points.transpose(0, 1).contiguous();   // (2, N)
  strides_ = strides.transpose(0, 1).contiguous();  // (1, N)
  shape_ = shape;
}

torch::Tensor AnchorFreeDetectImpl::decode_channels_first(const std::vector<torch::Tensor>& maps) {
  const std::vector<torch::Tensor> raw(maps.begin(), maps.begin() + nl);  // the one-to-many head
  update_anchors(raw);
  const int64_t bs = raw[0].size(0);
  std::vector<torch::Tensor> flat;
  for (const auto& r : raw) flat.push_back(r.reshape({bs, no, -1}));
  const auto parts = torch::cat(flat, 2).split_with_sizes({4 * reg_max, nc}, 1);
  const torch::Tensor dist = dfl ? dfl->forward(parts[0]) : parts[0];
  const auto lt_rb = dist.chunk(2, 1);
  const torch::Tensor a = anchors_.unsqueeze(0);
  const torch::Tensor x1y1 = a - lt_rb[0], x2y2 = a + lt_rb[1];
  const torch::Tensor box = torch::cat({(x1y1 + x2y2) / 2, x2y2 - x1y1}, 1) * strides_;
  return torch::cat({box, parts[1].sigmoid()}, 1);
}

torch::Tensor AnchorFreeDetectImpl::decode(const std::vector<torch::Tensor>& raw) {
  const torch::Tensor y = decode_channels_first(raw);
  const torch::Tensor ones = torch::ones({y.size(0), 1, y.size(2)}, y.options());
  return torch::cat({y.slice(1, 0, 4), ones, y.slice(1, 4)}, 1).transpose(1, 2);
}

void AnchorFreeDetectImpl::set_strides(const std::vector<float>& strides) {
  stride = torch::tensor(strides);
  shape_.clear();
}

void AnchorFreeDetectImpl::initialize_biases() {
  torch::NoGradGuard no_grad;
  for (auto [box, cls] : {std::pair{cv2, cv3}, std::pair{one2one_cv2, one2one_cv3}}) {
    if (box.is_empty()) continue;
    for (int i = 0; i < nl; ++i) {
      box[i]->as<ChainImpl>()->last()->as<torch::nn::Conv2d>()->bias.fill_(2.0);
      const double s = stride[i].item<double>();
      cls[i]->as<ChainImpl>()->last()->as<torch::nn::Conv2d>()->bias.fill_(
          std::log(5.0 / nc / std::pow(640.0 / s, 2)));
    }
  }
}

}  // namespace yolo

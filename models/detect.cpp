#include "models/detect.h"

#include <torch/torch.h>

#include <cmath>

#include "utils/core/log.h"

namespace yolo {

DetectImpl::DetectImpl(int nc_, const std::vector<std::vector<double>>& a,
                       const std::vector<int>& ch)
    : nc(nc_), no(nc_ + 5), nl(static_cast<int>(a.size())), na(static_cast<int>(a[0].size() / 2)) {
  TORCH_CHECK(static_cast<int>(ch.size()) == nl, "Detect: ", ch.size(), " inputs but ", nl,
              " anchor levels");
  std::vector<float> flat;
  for (const auto& level : a) flat.insert(flat.end(), level.begin(), level.end());
  anchors = register_buffer("anchors", torch::tensor(flat).view({nl, na, 2}));
  stride = torch::ones({nl});
  m = register_module("m", torch::nn::ModuleList());
  for (int c : ch) m->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c, no * na, 1)));
  grid_.resize(nl);
  anchor_grid_.resize(nl);
}

std::vector<torch::Tensor> DetectImpl::forward(std::vector<torch::Tensor> x) {
  for (int i = 0; i < nl; ++i) {
    torch::Tensor y = m[i]->as<torch::nn::Conv2d>()->forward(x[i]);
    const int64_t bs = y.size(0), ny = y.size(2), nx = y.size(3);
    x[i] = y.view({bs, na, no, ny, nx}).permute({0, 1, 3, 4, 2}).contiguous();
  }
  return x;
}

torch::Tensor DetectImpl::decode(const std::vector<torch::Tensor>& raw) {
  std::vector<torch::Tensor> z;
  for (int i = 0; i < nl; ++i) {
    const torch::Tensor& xi = raw[i];
    const int64_t bs = xi.size(0), ny = xi.size(2), nx = xi.size(3);
    if (!grid_[i].defined() || grid_[i].size(2) != ny || grid_[i].size(3) != nx ||
        grid_[i].device() != xi.device()) {
      const auto opts = torch::TensorOptions().dtype(xi.scalar_type()).device(xi.device());
      auto yx = torch::meshgrid({torch::arange(ny, opts), torch::arange(nx, opts)}, "ij");
      grid_[i] = torch::stack({yx[1], yx[0]}, 2).expand({1, na, ny, nx, 2}) - 0.5;
      anchor_grid_[i] = (anchors[i].to(opts) * stride[i].item<double>())
                            .view({1, na, 1, 1, 2})
                            .expand({1, na, ny, nx, 2});
    }
    const torch::Tensor s = xi.sigmoid();
    const torch::Tensor xy = (s.slice(4, 0, 2) * 2 + grid_[i]) * stride[i].item<double>();
    const torch::Tensor wh = (s.slice(4, 2, 4) * 2).pow(2) * anchor_grid_[i];
    z.push_back(torch::cat({xy, wh, s.slice(4, 4)}, 4).view({bs, na * ny * nx, no}));
  }
  return torch::cat(z, 1);
}

void DetectImpl::set_strides(const std::vector<float>& strides) {
  torch::NoGradGuard no_grad;
  stride = torch::tensor(strides);
  const torch::Tensor area = anchors.prod(-1).mean(-1).view(-1);
  const double da = (area[-1] - area[0]).item<double>();
  const double ds = strides.back() - strides.front();
  if (da != 0 && (da > 0) != (ds > 0)) {
    log_info("AutoAnchor: Reversing anchor order");
    anchors.copy_(anchors.flip(0));
  }
  anchors.div_(stride.view({-1, 1, 1}));
}

void DetectImpl::initialize_biases() {
  torch::NoGradGuard no_grad;
  for (int i = 0; i < nl; ++i) {
    auto conv = m[i]->as<torch::nn::Conv2d>();
    torch::Tensor b = conv->bias.view({na, -1});
    const double s = stride[i].item<double>();
    b.select(1, 4).add_(std::log(8.0 / std::pow(640.0 / s, 2)));
    b.slice(1, 5, 5 + nc).add_(std::log(0.6 / (nc - 0.99999)));
  }
}

}  // namespace yolo

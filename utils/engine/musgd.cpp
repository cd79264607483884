#include "utils/engine/musgd.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "utils/core/runtime/torch_compat.h"

namespace yolo {

at::Tensor newton_schulz5(const at::Tensor& g) {
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  at::Tensor x = g.to(torch::kBFloat16);
  x = x / (at::linalg_vector_norm(x, 2, {-2, -1}, true) + 1e-7);
  const bool tall = g.size(-2) > g.size(-1);
  if (tall) x = x.transpose(-2, -1);
  for (int i = 0; i < 5; ++i) {
    const at::Tensor m = torch::matmul(x, x.transpose(-2, -1));
    const at::Tensor p = torch::baddbmm(m, m, m, b, c);  // b m + c m m
    x = torch::baddbmm(x, p, x, a);                      // a x + p x
  }
  return tall ? x.transpose(-2, -1) : x;
}

std::vector<at::Tensor> muon_updates(const std::vector<at::Tensor>& grads,
                                     const std::vector<at::Tensor>& bufs, double beta,
                                     const at::Tensor* keep) {
  std::vector<at::Tensor> mutable_bufs = bufs;
  if (keep) {
    compat::foreach_mul_(mutable_bufs, *keep * beta + (1 - *keep));  // beta, or 1 on a skip
  } else {
    at::_foreach_mul_(mutable_bufs, beta);
  }
  at::_foreach_add_(mutable_bufs, grads, 1 - beta);
  std::vector<at::Tensor> updates = at::_foreach_mul(bufs, beta);
  at::_foreach_add_(updates, grads, 1 - beta);

  // Buckets by (columns, scale) in order of first appearance, rows descending (a stable sort),
  // split where the largest is over 16x the next: Ultralytics' batching.
  struct Item {
    size_t index;
    at::Tensor matrix;
  };
  std::vector<std::tuple<int64_t, double, std::vector<Item>>> buckets;
  for (size_t i = 0; i < updates.size(); ++i) {
    const at::Tensor m = updates[i].contiguous().reshape({updates[i].size(0), -1});
    const double scale =
        std::sqrt(std::max(1.0, static_cast<double>(grads[i].size(-2)) / grads[i].size(-1)));
    auto it = std::find_if(buckets.begin(), buckets.end(), [&](const auto& bk) {
      return std::get<0>(bk) == m.size(1) && std::get<1>(bk) == scale;
    });
    if (it == buckets.end()) it = buckets.insert(buckets.end(), {m.size(1), scale, {}});
    std::get<2>(*it).push_back({i, m});
  }
  for (auto& [cols, scale, items] : buckets) {
    std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
      return x.matrix.size(0) > y.matrix.size(0);
    });
    for (size_t start = 0, j = 1; j <= items.size(); ++j) {
      if (j < items.size() && items[start].matrix.size(0) <= 16 * items[j].matrix.size(0)) {
        continue;
      }
      const int64_t rows = items[start].matrix.size(0);
      at::Tensor x = torch::zeros({static_cast<int64_t>(j - start), rows, cols},
                                  items[start].matrix.options());
      for (size_t k = start; k < j; ++k) {
        x[k - start].narrow(0, 0, items[k].matrix.size(0)).copy_(items[k].matrix);
      }
      const at::Tensor o = newton_schulz5(x).contiguous().to(x.scalar_type()).mul_(scale);
      for (size_t k = start; k < j; ++k) {
        const size_t i = items[k].index;
        updates[i] = o[k - start].narrow(0, 0, items[k].matrix.size(0)).reshape(grads[i].sizes());
      }
      start = j;
    }
  }
  return updates;
}

}  // namespace yolo

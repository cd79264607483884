#include "models/batch_norm_silu.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace yolo {
namespace {

// The row kernels are compiled for AVX-512 and AVX2 as well as the baseline, and the loader picks
// the best the CPU has: the build itself targets plain x86-64, whose 4-wide vectors would leave
// the exponential slower than ATen's own SiLU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define YOLO_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define YOLO_CPU_CLONES
#endif

// exp(x) to about 1 ulp (Cephes' expf): a degree-6 polynomial on [-ln2/2, ln2/2] scaled by 2^n,
// written so that the compiler vectorises the loops that call it. Saturates to 0 below -87.3 and
// to about 1.6e38 above 88, where SiLU and its derivative no longer depend on the value.
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.3f), 88.0f);
  // Round x / ln2 to the nearest integer by adding and subtracting 1.5 * 2^23.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// The kernels walk the NHWC tensor as a flat array in blocks of whole rows (pixels) at least
// kMinBlock floats long, with the per-channel parameters tiled to one block: the inner loops are
// then long whatever the channel count (16 channels would otherwise give one vector per loop), and
// per-channel sums have one accumulator per block element, so no sum waits on the previous row.
constexpr int64_t kMinBlock = 256;
// Blocks summed in float before the partial sums move into double: few enough that float keeps
// full precision for activations of any scale.
constexpr int64_t kFloatBlocks = 32;

int64_t block_size(int64_t C) { return (kMinBlock + C - 1) / C * C; }

// Per-element sums of d = x - shift and d^2 over the flat elements [e0, e1) (e0 a multiple of B),
// added into s1 and s2. `shift` (the first row) keeps the variance's subtraction well conditioned.
YOLO_CPU_CLONES void stats_range(const float* __restrict x, int64_t e0, int64_t e1, int64_t B,
                                 const float* __restrict shift, float* __restrict f1,
                                 float* __restrict f2, double* __restrict s1,
                                 double* __restrict s2) {
  for (int64_t e = e0; e < e1; e += B * kFloatBlocks) {
    const int64_t end = std::min(e1, e + B * kFloatBlocks);
    std::fill(f1, f1 + B, 0.0f);
    std::fill(f2, f2 + B, 0.0f);
    for (int64_t b = e; b < end; b += B) {
      const int64_t len = std::min(B, end - b);
      const float* __restrict xb = x + b;
      for (int64_t i = 0; i < len; ++i) {
        const float d = xb[i] - shift[i];
        f1[i] += d;
        f2[i] += d * d;
      }
    }
    for (int64_t i = 0; i < B; ++i) {
      s1[i] += f1[i];
      s2[i] += f2[i];
    }
  }
}

// z = silu(x * a + b) over the flat elements [e0, e1).
YOLO_CPU_CLONES void forward_range(const float* __restrict x, float* __restrict z, int64_t e0,
                                   int64_t e1, int64_t B, const float* __restrict a,
                                   const float* __restrict b) {
  for (int64_t e = e0; e < e1; e += B) {
    const int64_t len = std::min(B, e1 - e);
    const float* __restrict xb = x + e;
    float* __restrict zb = z + e;
    for (int64_t i = 0; i < len; ++i) {
      const float y = xb[i] * a[i] + b[i];
      zb[i] = y / (1.0f + exp_approx(-y));
    }
  }
}

// Backward's first pass: g = gz * silu'(y), y = (x - mean) * a + beta, written to g; sums of g
// and of g * (x - mean) added into s1 and s2. gz's rows (pixels) lie gz_stride floats apart: C
// for a channels-last tensor, more for a channel slice of a wider one (what torch::cat's backward
// passes on), whose rows are gathered block by block into gz_rows.
YOLO_CPU_CLONES void backward_sum_range(const float* __restrict gz, int64_t gz_stride, int64_t C,
                                        float* __restrict gz_rows, const float* __restrict x,
                                        float* __restrict g, int64_t e0, int64_t e1, int64_t B,
                                        const float* __restrict mean, const float* __restrict a,
                                        const float* __restrict beta, float* __restrict f1,
                                        float* __restrict f2, double* __restrict s1,
                                        double* __restrict s2) {
  for (int64_t e = e0; e < e1; e += B * kFloatBlocks) {
    const int64_t end = std::min(e1, e + B * kFloatBlocks);
    std::fill(f1, f1 + B, 0.0f);
    std::fill(f2, f2 + B, 0.0f);
    for (int64_t b = e; b < end; b += B) {
      const int64_t len = std::min(B, end - b);
      const float* __restrict gzb = gz + b;
      if (gz_stride != C) {
        for (int64_t r = 0; r < len / C; ++r) {
          std::memcpy(gz_rows + r * C, gz + (b / C + r) * gz_stride, C * sizeof(float));
        }
        gzb = gz_rows;
      }
      const float* __restrict xb = x + b;
      float* __restrict gb = g + b;
      for (int64_t i = 0; i < len; ++i) {
        const float xc = xb[i] - mean[i];
        const float y = xc * a[i] + beta[i];
        const float s = 1.0f / (1.0f + exp_approx(-y));
        const float gy = gzb[i] * (s * (1.0f + y * (1.0f - s)));
        gb[i] = gy;
        f1[i] += gy;
        f2[i] += gy * xc;
      }
    }
    for (int64_t i = 0; i < B; ++i) {
      s1[i] += f1[i];
      s2[i] += f2[i];
    }
  }
}

// Backward's second pass, in place: g = a * g + k1 * (x - mean) + k0.
YOLO_CPU_CLONES void backward_apply_range(float* __restrict g, const float* __restrict x,
                                          int64_t e0, int64_t e1, int64_t B,
                                          const float* __restrict mean, const float* __restrict a,
                                          const float* __restrict k0, const float* __restrict k1) {
  for (int64_t e = e0; e < e1; e += B) {
    const int64_t len = std::min(B, e1 - e);
    float* __restrict gb = g + e;
    const float* __restrict xb = x + e;
    for (int64_t i = 0; i < len; ++i) gb[i] = a[i] * gb[i] + k1[i] * (xb[i] - mean[i]) + k0[i];
  }
}

// One value per channel, repeated to fill a block of B elements.
std::vector<float> tiled(const std::vector<double>& per_channel, int64_t B) {
  const int64_t C = static_cast<int64_t>(per_channel.size());
  std::vector<float> t(B);
  for (int64_t i = 0; i < B; ++i) t[i] = static_cast<float>(per_channel[i % C]);
  return t;
}

std::vector<double> values(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<double>(p, p + c.numel());
}

torch::Tensor channel_tensor(const std::vector<double>& v) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(v.size())}, torch::kFloat);
  std::copy(v.begin(), v.end(), t.data_ptr<float>());
  return t;
}

// Runs fn(e0, e1) over the tensor's n elements in parallel, split at block boundaries.
template <typename Fn>
void for_blocks(int64_t n, int64_t B, const Fn& fn) {
  const int64_t blocks = (n + B - 1) / B;
  at::parallel_for(0, blocks, std::max<int64_t>(1, (int64_t{1} << 15) / B),
                   [&](int64_t b0, int64_t b1) { fn(b0 * B, std::min(n, b1 * B)); });
}

// Runs fn(e0, e1, f1, f2, s1, s2) in parallel, each thread with its own float scratch and double
// sums of B elements; returns the two sums per channel, added over threads and block positions.
template <typename Fn>
std::pair<std::vector<double>, std::vector<double>> channel_sums(int64_t n, int64_t C, int64_t B,
                                                                 const Fn& fn) {
  const int threads = at::get_num_threads();
  std::vector<double> s1(threads * B, 0.0), s2(threads * B, 0.0);
  for_blocks(n, B, [&](int64_t e0, int64_t e1) {
    const int t = at::get_thread_num();
    std::vector<float> f1(B), f2(B);
    fn(e0, e1, f1.data(), f2.data(), s1.data() + t * B, s2.data() + t * B);
  });
  std::vector<double> c1(C, 0.0), c2(C, 0.0);
  for (int64_t i = 0; i < threads * B; ++i) {
    c1[i % C] += s1[i];
    c2[i % C] += s2[i];
  }
  return {std::move(c1), std::move(c2)};
}

// The distance in floats between the rows (pixels) of a float NHWC tensor whose rows are
// contiguous but may be slices of wider rows, as a channel slice of a channels-last tensor is;
// 0 for any other layout.
int64_t nhwc_row_stride(const torch::Tensor& t) {
  if (t.scalar_type() != torch::kFloat || !t.device().is_cpu() || t.dim() != 4) return 0;
  const int64_t C = t.size(1), H = t.size(2), W = t.size(3), s = t.stride(3);
  if (W < 2 || t.stride(1) != 1 || s < C) return 0;
  if (H > 1 && t.stride(2) != W * s) return 0;
  if (t.size(0) > 1 && t.stride(0) != H * W * s) return 0;
  return s;
}

// z = silu(x * a + b), a and b per channel.
torch::Tensor silu_of_affine(const torch::Tensor& x, const std::vector<double>& a,
                             const std::vector<double>& b) {
  const int64_t C = x.size(1), B = block_size(C);
  torch::Tensor z = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
  const std::vector<float> a_tiled = tiled(a, B), b_tiled = tiled(b, B);
  const float* xp = x.data_ptr<float>();
  float* zp = z.data_ptr<float>();
  for_blocks(x.numel(), B, [&](int64_t e0, int64_t e1) {
    forward_range(xp, zp, e0, e1, B, a_tiled.data(), b_tiled.data());
  });
  return z;
}

// silu(bn(x)) in training: the batch's statistics (mean, invstd) come in as constants, and
// backward applies BatchNorm's full gradient, which accounts for them.
class BatchNormSilu : public torch::autograd::Function<BatchNormSilu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const torch::Tensor& mean, const torch::Tensor& invstd) {
    ctx->save_for_backward({x, weight, bias, mean, invstd});
    const std::vector<double> w = values(weight), beta = values(bias), m = values(mean),
                              is = values(invstd);
    std::vector<double> a(w.size()), b(w.size());
    for (size_t c = 0; c < w.size(); ++c) {
      a[c] = w[c] * is[c];
      b[c] = beta[c] - m[c] * a[c];
    }
    return silu_of_affine(x, a, b);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const int64_t C = x.size(1), B = block_size(C), n = x.numel(), rows = n / C;
    const int64_t sliced = nhwc_row_stride(grads[0]);
    const torch::Tensor gz =
        sliced ? grads[0] : grads[0].contiguous(at::MemoryFormat::ChannelsLast);
    const int64_t gz_stride = sliced ? sliced : C;
    const std::vector<double> w = values(saved[1]), beta = values(saved[2]), m = values(saved[3]),
                              is = values(saved[4]);
    std::vector<double> a(C);
    for (int64_t c = 0; c < C; ++c) a[c] = w[c] * is[c];
    const std::vector<float> m_tiled = tiled(m, B), a_tiled = tiled(a, B),
                             beta_tiled = tiled(beta, B);
    torch::Tensor g = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
    const float *gzp = gz.data_ptr<float>(), *xp = x.data_ptr<float>();
    float* gp = g.data_ptr<float>();
    auto [s1, s2] = channel_sums(
        n, C, B, [&](int64_t e0, int64_t e1, float* f1, float* f2, double* a1, double* a2) {
          std::vector<float> gz_rows(gz_stride == C ? 0 : B);
          backward_sum_range(gzp, gz_stride, C, gz_rows.data(), xp, gp, e0, e1, B, m_tiled.data(),
                             a_tiled.data(), beta_tiled.data(), f1, f2, a1, a2);
        });
    // d bias = sum(g); d weight = sum(g * xhat) = invstd * sum(g * (x - mean));
    // dx = a * (g - d bias / n - xhat * d weight / n).
    std::vector<double> grad_w(C), k0(C), k1(C);
    for (int64_t c = 0; c < C; ++c) {
      grad_w[c] = is[c] * s2[c];
      k0[c] = -a[c] * s1[c] / rows;
      k1[c] = -a[c] * is[c] * grad_w[c] / rows;
    }
    const std::vector<float> k0_tiled = tiled(k0, B), k1_tiled = tiled(k1, B);
    for_blocks(n, B, [&](int64_t e0, int64_t e1) {
      backward_apply_range(gp, xp, e0, e1, B, m_tiled.data(), a_tiled.data(), k0_tiled.data(),
                           k1_tiled.data());
    });
    return {g, channel_tensor(grad_w), channel_tensor(s1), torch::Tensor(), torch::Tensor()};
  }
};

bool float_cpu(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat;
}

bool float_cpu_vector(const torch::Tensor& t) {
  return float_cpu(t) && t.dim() == 1 && t.is_contiguous();
}

}  // namespace

bool batch_norm_silu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn) {
  const auto& o = bn.options;
  if (!float_cpu(x) || x.dim() != 4 || x.size(1) != o.num_features() || x.numel() == 0) {
    return false;
  }
  // NCHW tensors, and those that are both layouts at once (1x1 maps), keep ATen's kernels.
  if (x.is_contiguous() || !x.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  if (!o.affine() || !o.track_running_stats() || !o.momentum().has_value()) return false;
  if (!float_cpu_vector(bn.weight) || !float_cpu_vector(bn.bias) ||
      !float_cpu_vector(bn.running_mean) || !float_cpu_vector(bn.running_var)) {
    return false;
  }
  if (bn.is_training()) return x.numel() / x.size(1) > 1;  // one value: BatchNorm's own error
  const bool wants_grad =
      torch::GradMode::is_enabled() &&
      (x.requires_grad() || bn.weight.requires_grad() || bn.bias.requires_grad());
  return !wants_grad;
}

torch::Tensor batch_norm_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) {
  const double eps = bn.options.eps();
  const int64_t C = x.size(1), n = x.numel(), rows = n / C;
  if (!bn.is_training()) {
    const std::vector<double> w = values(bn.weight), beta = values(bn.bias),
                              rm = values(bn.running_mean), rv = values(bn.running_var);
    std::vector<double> a(C), b(C);
    for (int64_t c = 0; c < C; ++c) {
      a[c] = w[c] / std::sqrt(rv[c] + eps);
      b[c] = beta[c] - rm[c] * a[c];
    }
    return silu_of_affine(x, a, b);
  }
  // The batch's mean and biased variance per channel, from sums of x minus its first row.
  const int64_t B = block_size(C);
  const float* xp = x.data_ptr<float>();
  const std::vector<float> shift = tiled(std::vector<double>(xp, xp + C), B);
  auto [s1, s2] = channel_sums(
      n, C, B, [&](int64_t e0, int64_t e1, float* f1, float* f2, double* a1, double* a2) {
        stats_range(xp, e0, e1, B, shift.data(), f1, f2, a1, a2);
      });
  std::vector<double> mean(C), var(C), invstd(C);
  for (int64_t c = 0; c < C; ++c) {
    const double d = s1[c] / rows;
    mean[c] = xp[c] + d;
    var[c] = std::max(s2[c] / rows - d * d, 0.0);
    invstd[c] = 1.0 / std::sqrt(var[c] + eps);
  }
  {
    torch::NoGradGuard no_grad;
    const double m = *bn.options.momentum(), unbias = static_cast<double>(rows) / (rows - 1);
    float* rm = bn.running_mean.data_ptr<float>();
    float* rv = bn.running_var.data_ptr<float>();
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = static_cast<float>((1.0 - m) * rm[c] + m * mean[c]);
      rv[c] = static_cast<float>((1.0 - m) * rv[c] + m * var[c] * unbias);
    }
    bn.num_batches_tracked.add_(1);
  }
  return BatchNormSilu::apply(x, bn.weight, bn.bias, channel_tensor(mean), channel_tensor(invstd));
}

}  // namespace yolo

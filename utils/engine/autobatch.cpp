#include "utils/engine/autobatch.h"

#include <ATen/Context.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>

#include "utils/core/log.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/grad_scaler.h"

namespace yolo {

namespace {

const char kPrefix[] = "AutoBatch: ";

std::string fmt(const char* f, double v) {
  char b[32];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

// numpy.polyfit(x, y, 1): least squares slope and intercept.
std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
  }
  const double den = n * sxx - sx * sx;
  if (x.size() < 2 || den == 0) return {0, y.empty() ? 0 : sy / n};
  const double slope = (n * sxy - sx * sy) / den;
  return {slope, (sy - slope * sx) / n};
}

// The memory (GB, as YOLOv5's profile reports it) one training step takes at batch size `b`;
// empty when it fails (out of memory).
std::optional<double> profile_step(DetectionModel& model, int b, int imgsz, bool amp,
                                   const c10::Device& device) {
  try {
    const at::Tensor x =
        torch::empty({b, 3, imgsz, imgsz}, torch::dtype(torch::kFloat).device(device));
    for (int i = 0; i < 3; ++i) {
      AutocastScope autocast(amp);
      const ModelOutput out = model->forward(x);
      at::Tensor s = torch::zeros({}, x.options());
      for (const at::Tensor& y : out.raw) s = s + y.sum().to(torch::kFloat);
      s.backward();
    }
    cuda_synchronize(device);
    const double gb = cuda_memory_reserved_gb(device);
    cuda_empty_cache();
    return gb;
  } catch (const std::exception& e) {
    log_warn(std::string(kPrefix) + "batch size " + std::to_string(b) +
             " failed: " + std::string(e.what()).substr(0, 200));
    cuda_empty_cache();
    return std::nullopt;
  }
}

}  // namespace

AutoBatchChoice fit_batch_size(const AutoBatchProfile& p, double fraction, int fallback) {
  AutoBatchChoice c;
  const double free = p.total_gib - (p.reserved_gib + p.allocated_gib);
  // YOLOv5 fits the successful sizes' memory against the first ones of the list.
  std::vector<double> x, y;
  for (const auto& m : p.memory_gb) {
    if (!m) continue;
    x.push_back(p.batch_sizes[y.size()]);
    y.push_back(*m);
  }
  const auto [slope, intercept] = fit_line(x, y);
  double bf = slope != 0 ? (free * fraction - intercept) / slope : 0;
  int b = std::isfinite(bf) && std::abs(bf) < 1e9 ? static_cast<int>(bf) : 0;  // int() truncates
  for (size_t i = 0; i < p.memory_gb.size(); ++i) {
    if (p.memory_gb[i]) continue;
    if (b >= p.batch_sizes[i]) b = p.batch_sizes[i > 0 ? i - 1 : 0];  // below the first failure
    break;
  }
  if (y.empty() || b < 1 || b > 1024) {
    b = fallback;
    c.fallback = true;
  }
  c.batch_size = b;
  c.fraction = p.total_gib > 0
                   ? (slope * b + intercept + p.reserved_gib + p.allocated_gib) / p.total_gib
                   : 0;
  c.line = std::string(kPrefix) + "Using batch-size " + std::to_string(b) + " for " + p.device +
           " " + fmt("%.2f", p.total_gib * c.fraction) + "G/" + fmt("%.2f", p.total_gib) + "G (" +
           fmt("%.0f", c.fraction * 100) + "%)";
  return c;
}

int autobatch(DetectionModel& model, int imgsz, bool amp, const c10::Device& device) {
  log_info(std::string(kPrefix) + "Computing optimal batch size for --imgsz " +
           std::to_string(imgsz));
  if (!device.is_cuda()) {
    log_info(std::string(kPrefix) + "CUDA not detected, using default CPU batch-size 16");
    return 16;
  }
  AutoBatchProfile p;
  const CudaMemoryInfo m = cuda_memory_info(device);
  p.device = "CUDA:" + std::to_string(device.has_index() ? device.index() : 0);
  p.total_gib = m.total_gib, p.reserved_gib = m.reserved_gib, p.allocated_gib = m.allocated_gib;
  log_info(std::string(kPrefix) + p.device + " (" + m.name + ") " + fmt("%.2f", m.total_gib) +
           "G total, " + fmt("%.2f", m.reserved_gib) + "G reserved, " +
           fmt("%.2f", m.allocated_gib) + "G allocated, " +
           fmt("%.2f", m.total_gib - m.reserved_gib - m.allocated_gib) + "G free");
  // Profiled as YOLOv5 does, without cuDNN autotuning (its trial workspaces would count), on the
  // model itself: its BatchNorm statistics are put back and its gradients dropped afterwards.
  auto& ctx = at::globalContext();
  const bool benchmark = ctx.benchmarkCuDNN();
  ctx.setBenchmarkCuDNN(false);
  std::vector<at::Tensor> buffers;
  for (const at::Tensor& t : model->buffers()) buffers.push_back(t.clone());
  const bool training = model->is_training();
  model->train();
  std::string table = "      batch  GPU_mem (GB)";
  for (int b : p.batch_sizes) {
    p.memory_gb.push_back(profile_step(model, b, imgsz, amp, device));
    table += "\n" + fmt("%11.0f", b) +
             (p.memory_gb.back() ? fmt("%14.3f", *p.memory_gb.back()) : "        failed");
  }
  {
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (at::Tensor& t : model->buffers()) t.copy_(buffers[i++]);
  }
  for (at::Tensor& w : model->parameters()) w.mutable_grad().reset();
  model->train(training);
  ctx.setBenchmarkCuDNN(benchmark);
  cuda_empty_cache();
  log_info(table);
  const AutoBatchChoice c = fit_batch_size(p);
  if (c.fallback) {
    log_warn(std::string(kPrefix) +
             "CUDA anomaly detected (the memory profile gave no batch size in 1-1024), using "
             "batch-size 16; restarting the process and retrying may help");
  }
  log_info(c.line);
  return c.batch_size;
}

}  // namespace yolo

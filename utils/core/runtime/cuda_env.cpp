#include "utils/core/runtime/cuda_env.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#ifdef YOLO_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif
#ifdef YOLO_WITH_NCCL
#include <nccl.h>
#endif

#ifndef YOLO_VERSION
#define YOLO_VERSION "unknown"
#endif

namespace yolo {

namespace {
// cuDNN 9 numbers versions major * 10000 + minor * 100 + patch (91900: 9.19.0), 8 and
// earlier major * 1000 + minor * 100 + patch (8902: 8.9.2).
std::string cudnn_version_string(long v) {
  const long base = v >= 90000 ? 10000 : 1000;
  return std::to_string(v / base) + "." + std::to_string((v % base) / 100) + "." +
         std::to_string(v % 100);
}

// 13000 -> "13.0"
std::string cuda_version_string(long v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

bool cuda_compiled() {
#ifdef YOLO_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool nccl_compiled() {
#ifdef YOLO_WITH_NCCL
  return true;
#else
  return false;
#endif
}

void set_current_cuda_device(const c10::Device& device) {
  if (!device.is_cuda()) return;
#ifdef YOLO_WITH_CUDA
  c10::cuda::set_device(device.index());
#else
  throw std::runtime_error("this build has no CUDA: cannot use " + device.str());
#endif
}

double cuda_memory_reserved_gb(const c10::Device& device) {
#ifdef YOLO_WITH_CUDA
  if (device.is_cuda() && torch::cuda::is_available()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return static_cast<double>(stats.reserved_bytes[aggregate].current) / 1e9;
  }
#endif
  return 0.0;
}

double cuda_peak_allocated_gib(const c10::Device& device) {
#ifdef YOLO_WITH_CUDA
  if (device.is_cuda() && torch::cuda::is_available()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return static_cast<double>(stats.allocated_bytes[aggregate].peak) / (1 << 30);
  }
#endif
  return 0.0;
}

void cuda_reset_peak_memory(const c10::Device& device) {
#ifdef YOLO_WITH_CUDA
  if (device.is_cuda() && torch::cuda::is_available()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  }
#endif
}

CudaMemoryInfo cuda_memory_info(const c10::Device& device) {
  CudaMemoryInfo m;
#ifdef YOLO_WITH_CUDA
  if (device.is_cuda() && torch::cuda::is_available()) {
    const int index = device.has_index() ? device.index() : c10::cuda::current_device();
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, index) == cudaSuccess) {
      m.name = p.name;
      m.total_gib = static_cast<double>(p.totalGlobalMem) / (1 << 30);
    }
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    m.reserved_gib = static_cast<double>(stats.reserved_bytes[aggregate].current) / (1 << 30);
    m.allocated_gib = static_cast<double>(stats.allocated_bytes[aggregate].current) / (1 << 30);
  }
#else
  (void)device;
#endif
  return m;
}

void cuda_empty_cache() {
#ifdef YOLO_WITH_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

void cuda_synchronize(const c10::Device& device) {
#ifdef YOLO_WITH_CUDA
  if (device.is_cuda() && torch::cuda::is_available()) c10::cuda::device_synchronize();
#endif
}

namespace {
// torch.cuda.set_sync_debug_mode: `on` picks "error" (or "warn"), off "default".
bool set_cuda_sync_debug([[maybe_unused]] bool on, [[maybe_unused]] bool error) {
#ifdef YOLO_WITH_CUDA
  using c10::cuda::SyncDebugMode;
  c10::cuda::warning_state().set_sync_debug_mode(
      !on ? SyncDebugMode::L_DISABLED : (error ? SyncDebugMode::L_ERROR : SyncDebugMode::L_WARN));
  return true;
#else
  return false;
#endif
}
}  // namespace

bool set_cuda_sync_debug_error(bool on) { return set_cuda_sync_debug(on, true); }
bool set_cuda_sync_debug_warn(bool on) { return set_cuda_sync_debug(on, false); }

void configure_cudnn(bool deterministic) {
  auto& ctx = at::globalContext();
  ctx.setBenchmarkCuDNN(!deterministic);
  ctx.setDeterministicCuDNN(deterministic);
  if (deterministic) {
    // cuBLAS is deterministic only with a fixed workspace; it reads this when it starts.
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    ctx.setDeterministicAlgorithms(true, /*warn_only=*/true);
  }
}

std::string version_report() {
  std::ostringstream s;
  s << "yolo-cpp " << YOLO_VERSION << "\n";
  s << "LibTorch " << TORCH_VERSION << " (C++11 ABI: " << (_GLIBCXX_USE_CXX11_ABI ? "yes" : "no")
    << ")\n";
  const auto& hooks = at::detail::getCUDAHooks();
  if (cuda_compiled()) {
    s << "CUDA: compiled in, " << cuda_version_string(hooks.versionCUDART()) << "\n";
    s << "cuDNN: "
      << (hooks.hasCuDNN() ? cudnn_version_string(hooks.versionCuDNN()) : "not compiled in")
      << "\n";
  } else {
    s << "CUDA: not compiled in (CPU-only LibTorch)\ncuDNN: not compiled in\n";
  }
#ifdef YOLO_WITH_NCCL
  int nccl = 0;
  ncclGetVersion(&nccl);
  s << "NCCL: compiled in, " << nccl / 10000 << "." << (nccl % 10000) / 100 << "." << nccl % 100
    << "\n";
#else
  s << "NCCL: not compiled in\n";
#endif
  s << "Gloo: compiled in\n";
  const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  s << "GPUs: " << gpus;
  if (gpus == 0 && cuda_compiled()) s << " (no CUDA device or driver)";
  s << "\n";
#ifdef YOLO_WITH_CUDA
  for (int i = 0; i < gpus; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    char mem[32];
    std::snprintf(mem, sizeof(mem), "%.1f GiB", static_cast<double>(p.totalGlobalMem) / (1 << 30));
    s << "  cuda:" << i << " " << p.name << ", " << mem << ", compute capability " << p.major << "."
      << p.minor << "\n";
  }
#endif
  s << "Threads: " << at::get_num_threads() << " intra-op, " << at::get_num_interop_threads()
    << " inter-op\n";
  return s.str();
}

}  // namespace yolo

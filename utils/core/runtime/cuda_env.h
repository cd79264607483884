#pragma once
// What the CUDA side of the build and the machine offer, behind plain functions so that only
// cuda_env.cpp includes CUDA headers (and only in a build whose LibTorch has CUDA).
#include <c10/core/Device.h>

#include <string>

namespace yolo {

// True when this binary's LibTorch was built with CUDA (whether or not a GPU is present).
bool cuda_compiled();
// True when NCCL is compiled in (USE_C10D_NCCL), so `--dist-backend nccl` can work.
bool nccl_compiled();

// Makes `device` the calling thread's current CUDA device (cudaSetDevice), as DDP needs before
// creating a process group; a no-op for CPU devices.
void set_current_cuda_device(const c10::Device& device);

// YOLOv5's `torch.cuda.memory_reserved() / 1E9` for `device` (the caching allocator's reserved
// bytes, in GB); 0 on CPU.
double cuda_memory_reserved_gb(const c10::Device& device);

// The peak of memory allocated to tensors on `device` since the last reset, in GiB (0 on CPU),
// and the reset (torch.cuda.max_memory_allocated / reset_peak_memory_stats).
double cuda_peak_allocated_gib(const c10::Device& device);
void cuda_reset_peak_memory(const c10::Device& device);

// What AutoBatch reads of a GPU: its name and total memory, and what the caching allocator holds
// (reserved) and hands out to tensors (allocated), in GiB. All zero on CPU.
struct CudaMemoryInfo {
  std::string name;
  double total_gib = 0, reserved_gib = 0, allocated_gib = 0;
};
CudaMemoryInfo cuda_memory_info(const c10::Device& device);
// torch.cuda.empty_cache(): returns the caching allocator's unused blocks to the driver.
void cuda_empty_cache();

// Waits for all work queued on `device` (no-op on CPU).
void cuda_synchronize(const c10::Device& device);

// torch.cuda.set_sync_debug_mode("error") while `on`: any call that synchronises the host with
// the GPU throws. Returns false (and does nothing) without CUDA.
bool set_cuda_sync_debug_error(bool on);

// torch.cuda.set_sync_debug_mode("warn") while `on`: each synchronising call raises a c10 warning
// ("called a synchronizing CUDA operation") on the thread that made it, and goes on. Returns false
// (and does nothing) without CUDA.
bool set_cuda_sync_debug_warn(bool on);

// cuDNN autotuning as YOLOv5's init_seeds: benchmark on; with `deterministic`, benchmark off,
// deterministic cuDNN and deterministic algorithms (warning, not failing, where one has none).
void configure_cudnn(bool deterministic);

// The versions a bug report needs: project, LibTorch, CUDA, cuDNN, NCCL, Gloo, the GPUs seen
// (name and memory) and threads, one per line.
std::string version_report();
// --version's line in the programs' --help.
inline const char* version_help() {
  return "print the versions of LibTorch, CUDA, cuDNN, NCCL and the GPUs seen, and exit";
}

}  // namespace yolo

#pragma once
// The host's cores and memory for training: how many intra-op threads the step's kernels use and
// how many threads load batches, chosen together since on the CPU both compete for the same
// cores; and the allocator kept from returning memory that the next step allocates again.
#include <string>

#include "utils/core/cpu_threads.h"  // usable_cpus

namespace yolo {

struct ThreadPlan {
  int intra_op = 1;  // LibTorch's intra-op threads
  int workers = 0;   // loader threads; 0: batches load in the step, on the intra-op threads
  std::string line;  // what was chosen and how to override it, for the log
};

// CPU: the kernels take every usable core and batches load between steps on the same threads.
// Loader threads beside the kernels' threads preempt them mid-kernel, which costs more than
// loading in parallel with compute gains on few cores (bench_train measures both).
// CUDA: the GPU computes, so loader threads run ahead as YOLOv5's, min(cores / ranks, batch,
// --workers). OMP_NUM_THREADS (torchrun sets 1 per rank) fixes the intra-op count; --workers
// given on the command line is used as given (still capped as YOLOv5 caps it).
ThreadPlan plan_threads(bool cuda, int workers_flag, bool workers_given, int world_size,
                        int batch_size);

// Sets LibTorch's intra-op thread count to the plan's; on the CPU, unless `fixed`, it then follows
// the other processes' load (start_cpu_threads). Returns the line to log.
std::string apply_thread_plan(const ThreadPlan& plan, bool cpu, bool fixed);

// glibc's malloc serves large blocks (activations, gradients, batches) with mmap and unmaps them
// on free, so every step faults the same pages in again (a tenth of a CPU step's time). This
// serves them from the heap and keeps freed memory for the next step; the peak stays that of
// one step, as the steps allocate the same sizes. No effect with other allocators.
void reuse_freed_memory();

}  // namespace yolo

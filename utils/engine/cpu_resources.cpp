#include "utils/engine/cpu_resources.h"

#include <ATen/Parallel.h>
#include <malloc.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace yolo {

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPlan plan_threads(bool cuda, int workers_flag, bool workers_given, int world_size,
                        int batch_size) {
  ThreadPlan p;
  const int cpus = usable_cpus();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const bool omp_set = omp && std::atoi(omp) > 0;
  p.intra_op = omp_set ? std::atoi(omp) : std::max(1, cpus / std::max(world_size, 1));
  const int cap = std::min(cpus / std::max(world_size, 1), batch_size > 1 ? batch_size : 0);
  p.workers = std::max(0, std::min(cap, cuda || workers_given ? workers_flag : 0));
  p.line = "threads: " + std::to_string(p.intra_op) + " intra-op (" +
           (omp_set ? "OMP_NUM_THREADS" : std::to_string(cpus) + " cores") + "), ";
  if (p.workers > 0) {
    p.line += std::to_string(p.workers) + " loader workers";
  } else {
    p.line += "batches loaded in the step on the intra-op threads (--workers N: loader threads)";
  }
  return p;
}

void apply_thread_plan(const ThreadPlan& plan) {
  if (at::get_num_threads() != plan.intra_op) at::set_num_threads(plan.intra_op);
}

void reuse_freed_memory() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);  // fewer brk calls while the heap grows to its working size
#endif
}

}  // namespace yolo

#include "utils/engine/cpu_resources.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>

namespace yolo {

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
           (omp_set ? "OMP_NUM_THREADS" : usable_cpus_reason()) + "), ";
  if (p.workers > 0) {
    p.line += std::to_string(p.workers) + " loader workers";
  } else {
    p.line += "batches loaded in the step on the intra-op threads (--workers N: loader threads)";
  }
  return p;
}

std::string apply_thread_plan(const ThreadPlan& plan, bool cpu, bool fixed) {
  start_cpu_threads(plan.intra_op, cpu && !fixed);
  return cpu ? plan.line + "; intra-op " + cpu_threads_note() : plan.line;
}

void reuse_freed_memory() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);  // fewer brk calls while the heap grows to its working size
#endif
}

}  // namespace yolo

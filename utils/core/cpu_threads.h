#pragma once
// How many CPU threads the kernels use: the cores this process may really run on (its affinity
// mask and its cgroup's CPU quota), and, while it runs, fewer when other processes keep some of
// them busy. OpenMP's teams wait at a barrier for every member after each parallel region; a
// member the scheduler has given to another process makes each region wait for a time slice, and a
// training step runs thousands of regions. Measured on a 2-core machine beside two busy processes
// (docs/benchmarks.md#on-a-busy-machine), a 2-thread team took 3.5x its idle epoch time, one
// thread 2.3x. Fewer threads change the last bits of CPU results (reductions split by thread):
// OMP_NUM_THREADS, YOLO_FIXED_THREADS=1 or train's --deterministic keep the count fixed.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace yolo {

// Reads a whole small file (nullopt: not there); tests pass their own.
using TextReader = std::function<std::optional<std::string>(const std::string& path)>;

// The CPU quota of this process's cgroup and its ancestors, in cores (quota / period, the
// smallest on the path), or nullopt when none is set. cgroup v2 (`cpu.max`) and v1
// (`cpu.cfs_quota_us` / `cpu.cfs_period_us`), found from /proc/self/cgroup under /sys/fs/cgroup.
std::optional<double> cgroup_cpu_quota(const TextReader& read);
std::optional<double> cgroup_cpu_quota();

// The cores this process may use: its CPU affinity, capped by the cgroup quota rounded up; >= 1.
int usable_cpus();
// Why usable_cpus() says what it says, for the programs' first lines: "2 cores" or "1 of 2
// cores: cgroup CPU quota 1".
std::string usable_cpus_reason();

// Busy time of the CPUs in `cpus` (ids) from the text of /proc/stat, in clock ticks: user, nice,
// system, irq, softirq and steal (a VM's stolen time is as unusable as another process's), and
// all time (busy, idle and iowait). Returns {0, 0} when none of them is listed.
struct CpuTicks {
  double busy = 0, total = 0;
};
CpuTicks parse_proc_stat(const std::string& text, const std::vector<int>& cpus);

// The thread count for `max_threads` cores when other processes kept `others_busy` cores busy:
// the free cores, where a core three-quarters free still counts; at least 1.
int threads_for_load(int max_threads, double others_busy);

// At a program's start: the intra-op count set to usable_cpus() unless OMP_NUM_THREADS is set.
void init_cpu_threads();

// Sets LibTorch's intra-op threads to `max_threads` and, with `adapt`, lets cpu_threads_tick()
// lower and raise them with the other processes' load (sampled at most every `interval_s`).
// Adapting is off when the count is fixed by the environment (cpu_threads_fixed_by_env()) or
// /proc/stat cannot be read. Returns whether it adapts.
bool start_cpu_threads(int max_threads, bool adapt, double interval_s = 1.0);
// What the programs log: " (2 cores), fewer while other processes keep cores busy (...)" after
// "threads: N intra-op", or the reason the count is fixed.
std::string cpu_threads_note();
// Stops adapting and sets the count back to the start's: what a library call that adapted
// leaves to its caller.
void stop_cpu_threads();
// Cheap between samples (a clock read): call it between steps or batches of the thread that runs
// the kernels.
void cpu_threads_tick();
// Whether the count is adapting now, and the lowest and highest it has used since the start.
struct CpuThreadsState {
  bool adapting = false;
  int current = 1, lowest = 1, highest = 1;
};
CpuThreadsState cpu_threads_state();
// val's and detect's start on the CPU: every usable core (OMP_NUM_THREADS where set), adapting,
// and the "threads: ..." line logged once per process.
void start_threads_on_cpu();
// True when the user fixed the count (OMP_NUM_THREADS or YOLO_FIXED_THREADS=1).
bool cpu_threads_fixed_by_env();

}  // namespace yolo

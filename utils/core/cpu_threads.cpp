#include "utils/core/cpu_threads.h"

#include <ATen/Parallel.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "utils/core/log.h"

namespace yolo {

namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

// "/a/b" -> "/a/b", "/a", "": the cgroup and each ancestor, as suffixes of a mount point.
std::vector<std::string> cgroup_levels(std::string path) {
  std::vector<std::string> levels;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    levels.push_back(path);
    if (path.empty()) break;
    path = path.substr(0, path.rfind('/'));
  }
  return levels;
}

// The smallest quota over `levels` under the first of `mounts` that has the files; `quota_at`
// reads one level's quota in cores (nullopt: none set there) and sets its `here` to whether that
// level's file exists at all.
template <typename QuotaAt>
std::optional<double> smallest_quota(const std::vector<std::string>& mounts,
                                     const std::vector<std::string>& levels, QuotaAt quota_at) {
  for (const std::string& mount : mounts) {
    bool found = false;
    std::optional<double> best;
    for (const std::string& level : levels) {
      bool here = false;
      const std::optional<double> q = quota_at(mount + level, &here);
      found = found || here;
      if (q && (!best || *q < *best)) best = q;
    }
    if (found) return best;
  }
  return std::nullopt;
}

std::vector<int> affinity_cpus() {
  std::vector<int> ids;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i) {
      if (CPU_ISSET(i, &set)) ids.push_back(i);
    }
  }
  return ids;
}

double own_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The governor: one per process, driven from the thread that runs the kernels.
struct Governor {
  bool adapting = false;
  int max_threads = 1, current = 1, lowest = 1, highest = 1;
  double interval_s = 1.0, ticks_per_s = 100;
  std::vector<int> cpus;
  std::chrono::steady_clock::time_point last_time;
  CpuTicks last_ticks;
  double last_own = 0;
  int64_t samples = 0;
};
Governor& governor() {
  static Governor g;
  return g;
}

void set_threads(Governor& g, int n) {
  if (at::get_num_threads() != n) at::set_num_threads(n);
  g.current = n;
  g.lowest = std::min(g.lowest, n);
  g.highest = std::max(g.highest, n);
}

}  // namespace

std::optional<double> cgroup_cpu_quota(const TextReader& read) {
  const std::optional<std::string> self = read("/proc/self/cgroup");
  if (!self) return std::nullopt;
  std::optional<double> best;
  auto take = [&best](std::optional<double> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  for (const std::string& line : split(*self, '\n')) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::vector<std::string> levels = cgroup_levels(line.substr(b + 1));
    if (controllers.empty()) {  // v2: "max 100000" or "QUOTA PERIOD"
      take(smallest_quota({"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}, levels,
                          [&](const std::string& dir, bool* here) -> std::optional<double> {
                            const auto text = read(dir + "/cpu.max");
                            *here = text.has_value();
                            if (!text) return std::nullopt;
                            std::istringstream in(*text);
                            std::string quota;
                            double period = 0;
                            if (!(in >> quota >> period) || quota == "max" || period <= 0)
                              return std::nullopt;
                            const double q = std::atof(quota.c_str());
                            return q > 0 ? std::optional<double>(q / period) : std::nullopt;
                          }));
      continue;
    }
    const std::vector<std::string> names = split(controllers, ',');
    if (std::find(names.begin(), names.end(), "cpu") == names.end()) continue;
    // v1: quota -1 is none.
    take(smallest_quota(
        {"/sys/fs/cgroup/" + controllers, "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"},
        levels, [&](const std::string& dir, bool* here) -> std::optional<double> {
          const auto quota = read(dir + "/cpu.cfs_quota_us");
          const auto period = read(dir + "/cpu.cfs_period_us");
          *here = quota.has_value();
          if (!quota || !period) return std::nullopt;
          const double q = std::atof(quota->c_str()), p = std::atof(period->c_str());
          return q > 0 && p > 0 ? std::optional<double>(q / p) : std::nullopt;
        }));
  }
  return best;
}

std::optional<double> cgroup_cpu_quota() { return cgroup_cpu_quota(read_file); }

namespace {

// The affinity mask's cores, the quota, and the usable count they give.
struct UsableCpus {
  int cores = 1, usable = 1;
  std::optional<double> quota;
};
UsableCpus find_usable_cpus() {
  const std::vector<int> ids = affinity_cpus();
  UsableCpus u;
  u.cores = std::max<int>(1, ids.empty() ? std::thread::hardware_concurrency() : ids.size());
  u.quota = cgroup_cpu_quota();
  u.usable =
      u.quota ? std::clamp(static_cast<int>(std::ceil(*u.quota - 1e-6)), 1, u.cores) : u.cores;
  return u;
}

// OMP_NUM_THREADS when set to a positive count, else 0.
int omp_num_threads() {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  return omp ? std::max(0, std::atoi(omp)) : 0;
}

}  // namespace

int usable_cpus() { return find_usable_cpus().usable; }

std::string usable_cpus_reason() {
  const UsableCpus u = find_usable_cpus();
  if (u.usable == u.cores) return std::to_string(u.usable) + (u.usable == 1 ? " core" : " cores");
  std::ostringstream s;
  s.precision(3);
  s << u.usable << " of " << u.cores << " cores: cgroup CPU quota " << u.quota.value_or(0);
  return s.str();
}

CpuTicks parse_proc_stat(const std::string& text, const std::vector<int>& cpus) {
  CpuTicks t;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || !std::isdigit(line[3])) continue;
    std::istringstream f(line.substr(3));
    int id = -1;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    f >> id >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    if (std::find(cpus.begin(), cpus.end(), id) == cpus.end()) continue;
    const double busy = user + nice + system + irq + softirq + steal;
    t.busy += busy;
    t.total += busy + idle + iowait;
  }
  return t;
}

int threads_for_load(int max_threads, double others_busy) {
  const double free = max_threads - std::max(0.0, others_busy);
  return std::clamp(static_cast<int>(std::floor(free + 0.25)), 1, std::max(1, max_threads));
}

bool cpu_threads_fixed_by_env() {
  const char* fixed = std::getenv("YOLO_FIXED_THREADS");
  return omp_num_threads() > 0 || (fixed && std::string(fixed) == "1");
}

bool start_cpu_threads(int max_threads, bool adapt, double interval_s) {
  Governor& g = governor();
  g = Governor{};
  g.max_threads = std::max(1, max_threads);
  g.lowest = g.highest = g.max_threads;
  set_threads(g, g.max_threads);
  if (!adapt || g.max_threads < 2 || cpu_threads_fixed_by_env()) return false;
  g.cpus = affinity_cpus();
  const std::optional<std::string> stat = read_file("/proc/stat");
  if (!stat || g.cpus.empty()) return false;
  g.last_ticks = parse_proc_stat(*stat, g.cpus);
  if (g.last_ticks.total <= 0) return false;
  const long hz = sysconf(_SC_CLK_TCK);
  g.ticks_per_s = hz > 0 ? static_cast<double>(hz) : 100.0;
  g.interval_s = interval_s;
  g.last_time = std::chrono::steady_clock::now();
  g.last_own = own_cpu_seconds();
  g.adapting = true;
  return true;
}

void stop_cpu_threads() {
  Governor& g = governor();
  if (!g.adapting) return;
  g.adapting = false;
  set_threads(g, g.max_threads);
}

void cpu_threads_tick() {
  Governor& g = governor();
  if (!g.adapting) return;
  const auto now = std::chrono::steady_clock::now();
  const double wall = std::chrono::duration<double>(now - g.last_time).count();
  // The first look comes early: a short program would spend its whole run on a wrong count.
  if (wall < (g.samples == 0 ? std::min(0.2, g.interval_s) : g.interval_s)) return;
  ++g.samples;
  const std::optional<std::string> stat = read_file("/proc/stat");
  if (!stat) return;
  const CpuTicks t = parse_proc_stat(*stat, g.cpus);
  const double own = own_cpu_seconds();
  // Core-seconds the CPUs were busy, less this process's own, per second of wall time.
  const double others = ((t.busy - g.last_ticks.busy) / g.ticks_per_s - (own - g.last_own)) / wall;
  g.last_time = now;
  g.last_ticks = t;
  g.last_own = own;
  set_threads(g, threads_for_load(g.max_threads, others));
}

CpuThreadsState cpu_threads_state() {
  const Governor& g = governor();
  return {g.adapting, g.current, g.lowest, g.highest};
}

void init_cpu_threads() {
  if (omp_num_threads() > 0) return;
  const int n = usable_cpus();
  if (at::get_num_threads() != n) at::set_num_threads(n);
}

void start_threads_on_cpu() {
  const int omp = omp_num_threads();
  const int n = omp > 0 ? omp : usable_cpus();
  start_cpu_threads(n, true);
  static bool logged = false;
  if (logged) return;
  logged = true;
  log_info("threads: " + std::to_string(n) + " intra-op (" +
           (omp > 0 ? std::string("OMP_NUM_THREADS") : usable_cpus_reason()) + "), " +
           cpu_threads_note());
}

std::string cpu_threads_note() {
  const Governor& g = governor();
  if (g.adapting) {
    return "fewer while other processes keep cores busy (OMP_NUM_THREADS=N or YOLO_FIXED_THREADS=1 "
           "fix the count)";
  }
  if (cpu_threads_fixed_by_env()) return "fixed by OMP_NUM_THREADS or YOLO_FIXED_THREADS";
  return "fixed";
}

}  // namespace yolo

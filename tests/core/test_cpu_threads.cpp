// CPU threads: the cgroup quota and affinity that bound them, the other processes' load read from
// /proc/stat, and the count chosen for it.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "utils/core/cpu_threads.h"

namespace {

// A fake file system for cgroup_cpu_quota.
yolo::TextReader files(std::map<std::string, std::string> f) {
  return [f](const std::string& path) -> std::optional<std::string> {
    const auto it = f.find(path);
    if (it == f.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST(CpuThreads, CgroupV2QuotaIsTheSmallestOnThePath) {
  // Docker's --cpus 1.5 on the container's cgroup, a looser limit above it.
  EXPECT_DOUBLE_EQ(
      *yolo::cgroup_cpu_quota(files({{"/proc/self/cgroup", "0::/docker/abc\n"},
                                     {"/sys/fs/cgroup/docker/abc/cpu.max", "150000 100000\n"},
                                     {"/sys/fs/cgroup/docker/cpu.max", "400000 100000\n"},
                                     {"/sys/fs/cgroup/cpu.max", "max 100000\n"}})),
      1.5);
  // Inside the container's namespace the path reads "/" and the mount is its own cgroup.
  EXPECT_DOUBLE_EQ(*yolo::cgroup_cpu_quota(files({{"/proc/self/cgroup", "0::/\n"},
                                                  {"/sys/fs/cgroup/cpu.max", "50000 100000\n"}})),
                   0.5);
  EXPECT_FALSE(yolo::cgroup_cpu_quota(files({{"/proc/self/cgroup", "0::/user.slice\n"},
                                             {"/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n"},
                                             {"/sys/fs/cgroup/cpu.max", "max 100000\n"}})));
}

TEST(CpuThreads, CgroupV1QuotaFromTheCpuController) {
  const std::string self = "4:memory:/job\n3:cpu,cpuacct:/job\n0::/\n";
  EXPECT_DOUBLE_EQ(*yolo::cgroup_cpu_quota(
                       files({{"/proc/self/cgroup", self},
                              {"/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "100000\n"},
                              {"/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n"},
                              {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n"},
                              {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"}})),
                   1.0);
  // The controller mounted alone (/sys/fs/cgroup/cpu), no quota anywhere.
  EXPECT_FALSE(
      yolo::cgroup_cpu_quota(files({{"/proc/self/cgroup", "2:cpu:/\n"},
                                    {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"},
                                    {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"}})));
  EXPECT_FALSE(yolo::cgroup_cpu_quota(files({})));
}

TEST(CpuThreads, ProcStatCountsOnlyTheGivenCpusAndStealAsBusy) {
  const std::string stat =
      "cpu  900 0 100 1000 0 0 0 0 0 0\n"
      "cpu0 100 0 50 800 50 0 0 0 0 0\n"
      "cpu1 500 10 40 100 0 5 5 40 0 0\n"
      "cpu2 300 0 10 100 0 0 0 0 0 0\n"
      "intr 12345\n";
  const yolo::CpuTicks t = yolo::parse_proc_stat(stat, {0, 1});
  EXPECT_DOUBLE_EQ(t.busy, 150 + 600);  // cpu0 user+system; cpu1 user+nice+system+irq+softirq+steal
  EXPECT_DOUBLE_EQ(t.total, 150 + 850 + 600 + 100);
  EXPECT_DOUBLE_EQ(yolo::parse_proc_stat(stat, {7}).total, 0);
}

TEST(CpuThreads, CountIsTheFreeCoresAtLeastOne) {
  EXPECT_EQ(yolo::threads_for_load(2, 0.0), 2);
  EXPECT_EQ(yolo::threads_for_load(2, 0.2), 2);   // a light neighbour: keep the team
  EXPECT_EQ(yolo::threads_for_load(2, 0.67), 1);  // one busy process's fair share beside ours
  EXPECT_EQ(yolo::threads_for_load(2, 1.0), 1);
  EXPECT_EQ(yolo::threads_for_load(2, 3.5), 1);
  EXPECT_EQ(yolo::threads_for_load(8, 2.0), 6);
  EXPECT_EQ(yolo::threads_for_load(1, 0.0), 1);
  EXPECT_EQ(yolo::threads_for_load(4, -1.0), 4);  // measurement noise below zero
}

// The governor itself: beside busy processes on every usable core it drops to one thread, and it
// never adapts when the environment fixes the count.
TEST(CpuThreads, DropsToOneThreadBesideBusyProcesses) {
  const int cpus = yolo::usable_cpus();
  if (cpus < 2) GTEST_SKIP() << "one usable core: nothing to adapt";
  const char* fixed = std::getenv("YOLO_FIXED_THREADS");
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string saved_fixed = fixed ? fixed : "", saved_omp = omp ? omp : "";
  unsetenv("YOLO_FIXED_THREADS");
  unsetenv("OMP_NUM_THREADS");
  std::vector<pid_t> busy;
  for (int i = 0; i < cpus; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (std::chrono::steady_clock::now() < end) {
      }
      _exit(0);
    }
    busy.push_back(pid);
  }
  const bool started = yolo::start_cpu_threads(cpus, true, 0.2);
  EXPECT_TRUE(started);
  EXPECT_EQ(at::get_num_threads(), cpus);
  for (int i = 0; started && i < 30 && yolo::cpu_threads_state().current > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    yolo::cpu_threads_tick();
  }
  for (pid_t pid : busy) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  EXPECT_EQ(yolo::cpu_threads_state().current, 1);
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_TRUE(yolo::cpu_threads_state().adapting);
  setenv("YOLO_FIXED_THREADS", "1", 1);
  EXPECT_FALSE(yolo::start_cpu_threads(cpus, true));
  EXPECT_EQ(at::get_num_threads(), cpus);
  EXPECT_FALSE(yolo::cpu_threads_state().adapting);
  if (fixed)
    setenv("YOLO_FIXED_THREADS", saved_fixed.c_str(), 1);
  else
    unsetenv("YOLO_FIXED_THREADS");
  if (omp) setenv("OMP_NUM_THREADS", saved_omp.c_str(), 1);
}

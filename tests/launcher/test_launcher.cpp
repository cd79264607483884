// The built-in launcher's process management, with /bin/sh scripts as stand-in workers: the
// environment each rank gets, output handling, stopping on failure, SIGKILL after the grace
// period, forwarding the launcher's SIGTERM, and no zombies or orphans afterwards.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "utils/core/errors.h"
#include "utils/distributed/launcher.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// A scratch folder the worker scripts write their pids and markers to.
class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "yolo-launcher-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  struct Result {
    int status = -1;
    std::string out, err;
    double seconds = 0;
  };

  // Runs `script` in `nproc` /bin/sh workers ($D is the scratch folder) with short grace periods.
  Result launch(const std::string& script, int nproc, double grace = 1.0) {
    yolo::LaunchConfig cfg;
    cfg.grace_seconds = grace;
    cfg.stop_grace_seconds = grace;
    const std::string full = "D='" + dir_.string() + "'\n" + script;
    Result r;
    const auto t0 = Clock::now();
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    r.status = yolo::launch_workers("/bin/sh", {"-c", full, "sh"}, nproc, cfg);
    r.err = testing::internal::GetCapturedStderr();
    r.out = testing::internal::GetCapturedStdout();
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  }

  std::string read(const std::string& name) const {
    std::ifstream f(dir_ / name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().rfind("pid.", 0) == 0) {
        out.push_back(std::stoi(read(e.path().filename().string())));
      }
    }
    return out;
  }

  fs::path dir_;
};

// Gone: no such process, or (reparented to an init that has not reaped it yet) a zombie.
bool gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

// gone() within a few seconds: a signalled process is not dead at the instant kill() returns.
bool soon_gone(pid_t pid) {
  const auto t0 = Clock::now();
  while (!gone(pid) && Clock::now() - t0 < std::chrono::seconds(3)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return gone(pid);
}

// The launcher reaped everything: this process has no children left, zombies included.
void expect_no_children() {
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

int cores() {
  cpu_set_t set;
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return CPU_COUNT(&set);
}

// Sets (or unsets, with nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { had_ ? setenv(name_.c_str(), old_.c_str(), 1) : unsetenv(name_.c_str()); }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

TEST_F(LauncherTest, EachRankGetsTheDistributedEnvironment) {
  ScopedEnv agent("TORCHELASTIC_USE_AGENT_STORE", "True");
  ScopedEnv rank("RANK", "7");
  ScopedEnv omp("OMP_NUM_THREADS", nullptr);
  const Result r = launch(
      "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
      "$OMP_NUM_THREADS ${TORCHELASTIC_USE_AGENT_STORE-unset}\" > \"$D/env.$RANK\"",
      3);
  EXPECT_EQ(r.status, 0) << r.err;
  std::string port;
  for (int k = 0; k < 3; ++k) {
    std::istringstream env(read("env." + std::to_string(k)));
    std::string rk, lrk, ws, lws, addr, p, omp_threads, agent_store;
    env >> rk >> lrk >> ws >> lws >> addr >> p >> omp_threads >> agent_store;
    EXPECT_EQ(rk, std::to_string(k));
    EXPECT_EQ(lrk, std::to_string(k));
    EXPECT_EQ(ws, "3");
    EXPECT_EQ(lws, "3");
    EXPECT_EQ(addr, "127.0.0.1");
    EXPECT_GT(std::stoi(p), 0);
    EXPECT_LT(std::stoi(p), 65536);
    if (k > 0) {
      EXPECT_EQ(p, port) << "all ranks share one MASTER_PORT";
    }
    port = p;
    EXPECT_EQ(omp_threads, std::to_string(std::max(1, cores() / 3)));
    EXPECT_EQ(agent_store, "unset") << "rank 0 must host the TCPStore";
  }
  expect_no_children();
}

TEST_F(LauncherTest, KeepsAGivenOmpNumThreads) {
  ScopedEnv omp("OMP_NUM_THREADS", "5");
  const Result r = launch("echo $OMP_NUM_THREADS > \"$D/omp.$RANK\"", 2);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read("omp.0"), "5\n");
  EXPECT_EQ(read("omp.1"), "5\n");
}

TEST_F(LauncherTest, SetsNcclAsyncErrorHandlingAsTorchrunUnlessGiven) {
  {
    ScopedEnv nccl("TORCH_NCCL_ASYNC_ERROR_HANDLING", nullptr);
    const Result r = launch("echo $TORCH_NCCL_ASYNC_ERROR_HANDLING > \"$D/nccl.$RANK\"", 2);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(read("nccl.0"), "1\n");
    EXPECT_EQ(read("nccl.1"), "1\n");
  }
  ScopedEnv nccl("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3");
  const Result r = launch("echo $TORCH_NCCL_ASYNC_ERROR_HANDLING > \"$D/given.$RANK\"", 2);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read("given.1"), "3\n");
}

TEST_F(LauncherTest, OnlyRankZeroPrintsWhenAllSucceed) {
  const Result r = launch("echo \"out of rank $RANK\"; echo \"err of rank $RANK\" >&2", 2);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("out of rank 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("err of rank 0"), std::string::npos) << r.err;
  EXPECT_EQ((r.out + r.err).find("rank 1"), std::string::npos) << r.out << r.err;
  EXPECT_EQ((r.out + r.err).find("[rank1]"), std::string::npos);
  expect_no_children();
}

TEST_F(LauncherTest, AFailingRankStopsTheOthersAndIsNamed) {
  // Rank 1 fails once the others are up; ranks 0 and 2 would sleep for a minute.
  const Result r = launch(
      "if [ $RANK = 1 ]; then\n"
      "  while [ ! -e \"$D/pid.0\" ] || [ ! -e \"$D/pid.2\" ]; do sleep 0.05; done\n"
      "  echo 'rank one says hi'; echo 'boom: bad things' >&2; exit 3\n"
      "fi\n"
      "echo \"rank $RANK is fine\" >&2\n"
      "echo $$ > \"$D/tmp.$RANK\"; mv \"$D/tmp.$RANK\" \"$D/pid.$RANK\"; exec sleep 60\n",
      3, /*grace=*/5.0);
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.err.find("did not stop in time"), std::string::npos) << "sleep dies on SIGTERM";
  EXPECT_LT(r.seconds, 30.0);
  EXPECT_NE(r.err.find("worker rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with status 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[rank1] rank one says hi\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[rank1] boom: bad things\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[rank2]"), std::string::npos) << "rank 2 was stopped, it did not fail";
  EXPECT_NE(r.err.find("rank 0 is fine"), std::string::npos) << "rank 0 prints directly";
  ASSERT_EQ(pids().size(), 2u);
  for (pid_t pid : pids()) EXPECT_TRUE(gone(pid)) << pid;
  expect_no_children();
}

TEST_F(LauncherTest, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  const Result r = launch(
      "if [ $RANK = 0 ]; then\n"
      "  while [ ! -e \"$D/pid.1\" ]; do sleep 0.05; done; exit 4\n"
      "fi\n"
      "trap '' TERM; echo $$ > \"$D/tmp\"; mv \"$D/tmp\" \"$D/pid.1\"; exec sleep 60\n",
      2, /*grace=*/1.0);
  EXPECT_EQ(r.status, 4) << r.err;
  EXPECT_GE(r.seconds, 1.0) << "SIGKILL comes only after the grace period";
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.err.find("worker rank 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 did not stop in time"), std::string::npos) << r.err;
  ASSERT_EQ(pids().size(), 1u);
  EXPECT_TRUE(gone(pids()[0]));
  expect_no_children();
}

TEST_F(LauncherTest, ARankKilledByASignalGives128PlusTheSignal) {
  // Rank 1 dies once rank 0 has a child process; that child must be stopped with rank 0.
  const Result r = launch(
      "if [ $RANK = 0 ]; then\n"
      "  sleep 60 & echo $! > \"$D/tmp\"; mv \"$D/tmp\" \"$D/child.0\"; wait; exit 0\n"
      "fi\n"
      "while [ ! -e \"$D/child.0\" ]; do sleep 0.05; done; kill -KILL $$\n",
      2);
  EXPECT_EQ(r.status, 128 + SIGKILL) << r.err;
  EXPECT_TRUE(soon_gone(std::stoi(read("child.0")))) << "a worker's own child outlived it";
  EXPECT_NE(r.err.find("worker rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
  expect_no_children();
}

TEST_F(LauncherTest, SigtermToTheLauncherIsForwardedToEveryWorker) {
  // Rank 0 sends SIGTERM to its parent, the launcher (this test process), once ranks 1 and 2 are
  // ready. Ranks 0 and 1 stop on SIGTERM as the trainer does (note it, exit non-zero); rank 2
  // ignores it and must be SIGKILLed after the stop grace period.
  const Result r = launch(
      "if [ $RANK = 2 ]; then\n"
      "  trap '' TERM; echo $$ > \"$D/tmp\"; mv \"$D/tmp\" \"$D/pid.2\"; exec sleep 60\n"
      "fi\n"
      "trap 'kill $SP; echo got TERM > \"$D/term.$RANK\"; exit 1' TERM\n"
      "sleep 60 & SP=$!\n"
      "echo $$ > \"$D/pid.$RANK\"\n"
      "if [ $RANK = 0 ]; then\n"
      "  while [ ! -e \"$D/pid.1\" ] || [ ! -e \"$D/pid.2\" ]; do sleep 0.05; done\n"
      "  kill -TERM $PPID\n"
      "fi\n"
      "wait\n",
      3, /*grace=*/1.0);
  EXPECT_EQ(r.status, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("got SIGTERM"), std::string::npos) << r.err;
  EXPECT_EQ(read("term.0"), "got TERM\n");
  EXPECT_EQ(read("term.1"), "got TERM\n");
  EXPECT_EQ(r.err.find("[rank1]"), std::string::npos) << "stopping on request is no failure";
  ASSERT_EQ(pids().size(), 3u);
  for (pid_t pid : pids()) EXPECT_TRUE(gone(pid)) << pid;
  expect_no_children();
}

TEST_F(LauncherTest, WorkersGetSigtermWhenTheLauncherIsKilled) {
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    yolo::LaunchConfig cfg;
    const std::string script =
        "D='" + dir_.string() +
        "'; echo $$ > \"$D/tmp.$RANK\"; mv \"$D/tmp.$RANK\" \"$D/pid.$RANK\"; "
        "exec sleep 60";
    _exit(yolo::launch_workers("/bin/sh", {"-c", script, "sh"}, 2, cfg));
  }
  const auto t0 = Clock::now();
  while (pids().size() < 2 && Clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(launcher, SIGKILL);
  ASSERT_EQ(pids().size(), 2u);
  waitpid(launcher, nullptr, 0);
  const auto t1 = Clock::now();
  auto all_gone = [&] {
    for (pid_t pid : pids()) {
      if (!gone(pid)) return false;
    }
    return true;
  };
  while (!all_gone() && Clock::now() - t1 < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(all_gone()) << "workers outlived a SIGKILLed launcher";
  expect_no_children();
}

TEST_F(LauncherTest, AProgramThatCannotStartIsAnErrorNamingIt) {
  try {
    yolo::launch_workers(dir_.string() + "/no-such-program", {}, 2);
    ADD_FAILURE() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-program"), std::string::npos) << e.what();
  }
  expect_no_children();
}

TEST(LauncherArgs, WorkerArgsDropOnlyTheLauncherFlag) {
  const char* argv[] = {
      "train", "--nproc-per-node", "2", "--epochs", "3", "--nproc_per_node=auto", "--imgsz",
      "64",    "--nproc_per_node", "4"};
  EXPECT_EQ(yolo::worker_args(static_cast<int>(std::size(argv)), argv),
            (std::vector<std::string>{"--epochs", "3", "--imgsz", "64"}));
  const char* argv2[] = {"train", "--resume", "--nproc-per-node=2", "--device", "cpu"};
  EXPECT_EQ(yolo::worker_args(static_cast<int>(std::size(argv2)), argv2),
            (std::vector<std::string>{"--resume", "--device", "cpu"}));
}

TEST(LauncherArgs, ResolveNproc) {
  EXPECT_EQ(yolo::resolve_nproc(3), 3);
  EXPECT_GE(yolo::resolve_nproc(-1), 1);  // auto: GPUs, or 2 without
}

TEST(LauncherArgs, GracePeriodFromTheEnvironment) {
  {
    ScopedEnv g("YOLO_LAUNCH_GRACE_S", "0.5");
    EXPECT_DOUBLE_EQ(yolo::launch_config_from_env().grace_seconds, 0.5);
    EXPECT_DOUBLE_EQ(yolo::launch_config_from_env().stop_grace_seconds, 0.5);
  }
  {
    ScopedEnv g("YOLO_LAUNCH_GRACE_S", "soon");
    EXPECT_THROW(yolo::launch_config_from_env(), yolo::UsageError);
  }
  ScopedEnv g("YOLO_LAUNCH_GRACE_S", nullptr);
  EXPECT_DOUBLE_EQ(yolo::launch_config_from_env().grace_seconds, 10.0);
}

TEST(LauncherArgs, FreePortIsUsable) {
  const int port = yolo::find_free_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

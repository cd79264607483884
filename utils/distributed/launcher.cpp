#include "utils/distributed/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "utils/core/cpu_threads.h"
#include "utils/core/errors.h"
#include "utils/core/log.h"

extern char** environ;

namespace yolo {

namespace {

using Clock = std::chrono::steady_clock;

const char* const kFlagSpellings[] = {"--nproc-per-node", "--nproc_per_node"};

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// The launcher's signal state: handlers only count and poke the self-pipe, the loop does the rest.
volatile std::sig_atomic_t g_stop_signals = 0;
volatile std::sig_atomic_t g_last_signal = 0;
int g_wake_fd = -1;

extern "C" void on_launcher_signal(int sig) {
  const int saved = errno;
  if (sig != SIGCHLD) {
    g_last_signal = sig;
    g_stop_signals = g_stop_signals + 1;
  }
  if (g_wake_fd >= 0) {
    const char c = 0;
    [[maybe_unused]] const ssize_t n = write(g_wake_fd, &c, 1);
  }
  errno = saved;
}

constexpr int kHandled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

// Installs the handlers and the self-pipe; restores both on destruction (tests call the launcher
// in-process several times).
class SignalScope {
 public:
  SignalScope() {
    if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error(sys_error("pipe2"));
    g_stop_signals = 0;
    g_last_signal = 0;
    g_wake_fd = pipe_[1];
    struct sigaction sa {};
    sa.sa_handler = on_launcher_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kHandled); ++i) sigaction(kHandled[i], &sa, &old_[i]);
  }
  ~SignalScope() {
    for (size_t i = 0; i < std::size(kHandled); ++i) sigaction(kHandled[i], &old_[i], nullptr);
    g_wake_fd = -1;
    close(pipe_[0]);
    close(pipe_[1]);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  // Waits until a signal arrives or `timeout_ms` passes, then empties the pipe.
  void wait(int timeout_ms) const {
    pollfd p{pipe_[0], POLLIN, 0};
    poll(&p, 1, timeout_ms);  // EINTR is as good as a wake-up
    char buf[64];
    while (read(pipe_[0], buf, sizeof(buf)) > 0) {
    }
  }

 private:
  int pipe_[2]{-1, -1};
  struct sigaction old_[std::size(kHandled)]{};
};

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int log_fd = -1;  // ranks > 0: their captured stdout + stderr (an unlinked temporary file)
  bool running = false;
  bool signalled = false;  // we sent it a signal (its exit is then not its own failure)
  int status = 0;          // waitpid status once it has exited
};

// Exit status in the shell's convention: the exit code, or 128 + the signal that killed it.
int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? " (SIG" + std::string(name) + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

std::string seconds(double s) {
  std::ostringstream os;
  os << s << " s";
  return os.str();
}

std::string signal_name(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? "SIG" + std::string(name) : "signal " + std::to_string(sig);
}

// An unlinked temporary file for a rank's output: nothing to clean up, however we exit.
int make_log_file(int rank) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/yolo-train-rank" +
                     std::to_string(rank) + "-XXXXXX";
  const int fd = mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(sys_error("cannot create a log file in " + tmpl));
  unlink(tmpl.c_str());
  return fd;
}

// Prints the tail of a failed rank's captured output to stderr, each line prefixed "[rankK] ".
void show_log(const Worker& w, size_t max_bytes) {
  if (w.log_fd < 0) return;
  struct stat st {};
  if (fstat(w.log_fd, &st) != 0 || st.st_size == 0) return;
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t start = size > max_bytes ? size - max_bytes : 0;
  std::string text(size - start, '\0');
  ssize_t got = pread(w.log_fd, text.data(), text.size(), static_cast<off_t>(start));
  text.resize(got > 0 ? static_cast<size_t>(got) : 0);
  const std::string prefix = "[rank" + std::to_string(w.rank) + "] ";
  std::string out;
  size_t pos = 0;
  if (start > 0) {  // begin at a whole line
    const size_t nl = text.find('\n');
    pos = nl == std::string::npos ? text.size() : nl + 1;
    out += prefix + "... (" + std::to_string(start + pos) + " earlier bytes not shown)\n";
  }
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out += prefix + text.substr(pos, nl - pos) + "\n";
    pos = nl + 1;
  }
  std::cerr << out << std::flush;
}

// The workers' environment: ours without the variables we set (and torchrun's agent-store switch:
// rank 0 hosts the TCPStore here).
std::vector<std::string> worker_env(int rank, int nproc, const std::string& addr, int port) {
  static const char* const kReplaced[] = {"MASTER_ADDR",
                                          "MASTER_PORT",
                                          "RANK",
                                          "LOCAL_RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_WORLD_SIZE",
                                          "TORCHELASTIC_USE_AGENT_STORE"};
  std::vector<std::string> env;
  bool omp_set = false, nccl_set = false;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (std::find(std::begin(kReplaced), std::end(kReplaced), key) != std::end(kReplaced)) {
      continue;
    }
    if (key == "OMP_NUM_THREADS") omp_set = true;
    if (key == "TORCH_NCCL_ASYNC_ERROR_HANDLING") nccl_set = true;
    env.push_back(kv);
  }
  env.push_back("MASTER_ADDR=" + addr);
  env.push_back("MASTER_PORT=" + std::to_string(port));
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("LOCAL_RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(nproc));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(nproc));
  // N processes each with a thread per core would oversubscribe the machine N times; the cores
  // are those of the affinity mask and the cgroup's CPU quota.
  if (!omp_set)
    env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1, usable_cpus() / nproc)));
  // As torchrun: NCCL's watchdog tears the process down when a collective fails or times out,
  // instead of leaving it blocked in a kernel that waits for a peer that is gone.
  if (!nccl_set) env.push_back("TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Owns the worker processes: whatever way the launcher leaves (return or exception), no worker
// outlives it unreaped.
class WorkerSet {
 public:
  ~WorkerSet() {
    signal_all(SIGKILL);
    for (auto& w : workers_) {
      if (w.running) waitpid(w.pid, &w.status, 0);
      if (w.log_fd >= 0) close(w.log_fd);
    }
  }

  std::vector<Worker>& workers() { return workers_; }

  int alive() const {
    return static_cast<int>(
        std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; }));
  }

  // Signals each running worker's process group (the worker leads it after setsid), so helper
  // processes a worker started stop with it; a worker that has not reached setsid yet is
  // signalled directly.
  void signal_all(int sig) {
    for (auto& w : workers_) {
      if (w.running) {
        if (kill(-w.pid, sig) != 0) kill(w.pid, sig);
        w.signalled = true;
      }
    }
  }

  // fork + exec (no shell). The child only makes async-signal-safe calls before exec.
  void spawn(const std::string& exe, std::vector<std::string> argv, std::vector<std::string> env,
             int rank, int devnull) {
    Worker w;
    w.rank = rank;
    if (rank > 0) w.log_fd = make_log_file(rank);
    workers_.push_back(w);
    Worker& slot = workers_.back();
    std::vector<char*> cargv = c_strings(argv), cenv = c_strings(env);
    int exec_pipe[2];  // reports a failed exec's errno; closes (EOF) on a successful one
    if (pipe2(exec_pipe, O_CLOEXEC) != 0) throw std::runtime_error(sys_error("pipe2"));
    const pid_t parent = getpid();
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = fork();
    if (pid < 0) {
      const std::string err = sys_error("fork");
      close(exec_pipe[0]);
      close(exec_pipe[1]);
      throw std::runtime_error("cannot start worker rank " + std::to_string(rank) + ": " + err);
    }
    if (pid == 0) {
      // Own session: a Ctrl-C in the terminal reaches the launcher only, which sends each worker
      // exactly one SIGTERM (the trainer treats a second signal as "kill now").
      setsid();
      // Workers must not outlive a launcher that is killed outright.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(128 + SIGTERM);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) sigaction(sig, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(devnull, STDIN_FILENO);
      if (slot.log_fd >= 0) {
        dup2(slot.log_fd, STDOUT_FILENO);
        dup2(slot.log_fd, STDERR_FILENO);
      }
      execve(exe.c_str(), cargv.data(), cenv.data());
      const int err = errno;
      [[maybe_unused]] const ssize_t n = write(exec_pipe[1], &err, sizeof(err));
      _exit(127);
    }
    slot.pid = pid;
    slot.running = true;
    close(exec_pipe[1]);
    int child_errno = 0;
    ssize_t n;
    do {
      n = read(exec_pipe[0], &child_errno, sizeof(child_errno));
    } while (n < 0 && errno == EINTR);
    close(exec_pipe[0]);
    if (n == static_cast<ssize_t>(sizeof(child_errno))) {
      waitpid(pid, &slot.status, 0);
      slot.running = false;
      throw std::runtime_error("cannot start worker rank " + std::to_string(rank) + ": " + exe +
                               ": " + std::strerror(child_errno));
    }
  }

 private:
  std::vector<Worker> workers_;
};

}  // namespace

LaunchConfig launch_config_from_env() {
  LaunchConfig cfg;
  if (const char* g = std::getenv("YOLO_LAUNCH_GRACE_S"); g && *g) {
    char* end = nullptr;
    const double v = std::strtod(g, &end);
    if (*end != '\0' || !(v >= 0)) {
      throw UsageError("YOLO_LAUNCH_GRACE_S: expected seconds >= 0, got '" + std::string(g) + "'");
    }
    cfg.grace_seconds = v;
    cfg.stop_grace_seconds = v;
  }
  return cfg;
}

int find_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(sys_error("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = sys_error("cannot find a free port on 127.0.0.1");
    close(fd);
    throw std::runtime_error(err);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::vector<std::string> worker_args(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool drop = false;
    for (const char* flag : kFlagSpellings) {
      const std::string f = flag;
      if (a == f) {
        drop = true;
        ++i;  // and its value
      } else if (a.rfind(f + "=", 0) == 0) {
        drop = true;
      }
    }
    if (!drop) out.push_back(a);
  }
  return out;
}

int resolve_nproc(int nproc_per_node) {
  if (nproc_per_node >= 1) return nproc_per_node;
  // auto: one worker per visible GPU (NCCL allows one rank per device), else 2 on CPU.
  const int gpus = static_cast<int>(torch::cuda::device_count());
  return gpus >= 1 ? gpus : 2;
}

int launch_workers(const std::string& exe, const std::vector<std::string>& args, int nproc,
                   const LaunchConfig& cfg) {
  if (nproc < 1) throw std::invalid_argument("launch_workers: nproc must be >= 1");
  const int port = cfg.master_port > 0 ? cfg.master_port : find_free_port();
  std::vector<std::string> argv{cfg.argv0.empty() ? exe : cfg.argv0};
  argv.insert(argv.end(), args.begin(), args.end());

  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw std::runtime_error(sys_error("/dev/null"));
  SignalScope signals;  // before the first fork: a signal in between is not lost
  int result = 0;
  {
    WorkerSet set;
    try {
      for (int rank = 0; rank < nproc; ++rank) {
        set.spawn(exe, argv, worker_env(rank, nproc, cfg.master_addr, port), rank, devnull);
      }
    } catch (...) {
      close(devnull);
      throw;  // ~WorkerSet kills and reaps the ones already started
    }
    close(devnull);
    log_info("launcher: started " + std::to_string(nproc) +
             " workers (MASTER_ADDR=" + cfg.master_addr + " MASTER_PORT=" + std::to_string(port) +
             "); ranks > 0 print only if they fail");

    int failed = -1;      // index of the first worker that failed on its own
    int stop_signal = 0;  // the signal that interrupted the launcher
    int stop_signals_seen = 0;
    bool killed = false;
    Clock::time_point deadline = Clock::time_point::max();
    auto& workers = set.workers();
    auto begin_stop = [&](double grace) {
      set.signal_all(SIGTERM);
      deadline = Clock::now() +
                 std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace));
    };

    while (set.alive() > 0) {
      int timeout_ms = 200;  // a fallback: SIGCHLD and stop signals wake the wait at once
      if (deadline != Clock::time_point::max()) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 200));
      }
      signals.wait(timeout_ms);

      const int seen = g_stop_signals;
      if (seen > stop_signals_seen) {
        stop_signals_seen = seen;
        if (stop_signal == 0 && failed < 0) {
          stop_signal = g_last_signal;
          log_warn("launcher: got " + signal_name(stop_signal) + "; sending SIGTERM to " +
                   std::to_string(set.alive()) +
                   " worker(s): they finish the step and save a resumable last.pt (SIGKILL after " +
                   seconds(cfg.stop_grace_seconds) + ", or at a second Ctrl-C)");
          begin_stop(cfg.stop_grace_seconds);
        } else if (stop_signal == 0) {
          stop_signal = g_last_signal;  // already stopping after a failure
        } else if (!killed) {
          log_warn("launcher: second stop signal; killing the workers");
          set.signal_all(SIGKILL);
          killed = true;
        }
      }

      for (size_t i = 0; i < workers.size(); ++i) {
        Worker& w = workers[i];
        if (!w.running) continue;
        const pid_t r = waitpid(w.pid, &w.status, WNOHANG);
        if (r != w.pid) continue;
        w.running = false;
        const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
        if (ok || w.signalled) continue;
        // A failure of its own (not after our SIGTERM): this one decides the exit status.
        log_error("launcher: worker rank " + std::to_string(w.rank) + " (pid " +
                  std::to_string(w.pid) + ") " + describe_status(w.status));
        show_log(w, cfg.max_shown_bytes);
        if (failed < 0 && stop_signal == 0) {
          failed = static_cast<int>(i);
          if (set.alive() > 0) {
            log_error("launcher: stopping the " + std::to_string(set.alive()) +
                      " other running worker(s): SIGTERM, then SIGKILL after " +
                      seconds(cfg.grace_seconds));
            begin_stop(cfg.grace_seconds);
          }
        }
      }

      if (!killed && set.alive() > 0 && Clock::now() >= deadline) {
        for (const Worker& w : workers) {
          if (w.running) {
            log_error("launcher: worker rank " + std::to_string(w.rank) +
                      " did not stop in time; sending SIGKILL");
          }
        }
        set.signal_all(SIGKILL);
        killed = true;
      }
    }

    if (failed >= 0) {
      const Worker& w = workers[static_cast<size_t>(failed)];
      result = shell_status(w.status);
      if (result == 0) result = 1;
      log_error("launcher: training failed: worker rank " + std::to_string(w.rank) + " " +
                describe_status(w.status) + "; all " + std::to_string(nproc) +
                " workers have stopped");
    } else if (stop_signal != 0) {
      result = 128 + stop_signal;
      log_error("launcher: stopped by " + signal_name(stop_signal) + "; all " +
                std::to_string(nproc) + " workers have stopped");
    }
  }
  return result;
}

int run_launcher(int nproc_per_node, int argc, const char* const* argv) {
  const int nproc = resolve_nproc(nproc_per_node);
  LaunchConfig cfg = launch_config_from_env();
  cfg.argv0 = argc > 0 ? argv[0] : "train";
  return launch_workers("/proc/self/exe", worker_args(argc, argv), nproc, cfg);
}

}  // namespace yolo

#pragma once
// `train --nproc-per-node N`: a built-in stand-in for torchrun on one machine. It starts N worker
// processes (this executable, same flags minus --nproc-per-node) with the environment the DDP path
// reads (MASTER_ADDR/PORT, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE), supervises them and
// stops all of them when one fails or the launcher is interrupted.
#include <string>
#include <vector>

namespace yolo {

struct LaunchConfig {
  // After a worker failed: how long the others get between SIGTERM and SIGKILL.
  double grace_seconds = 10.0;
  // After a stop signal to the launcher: how long the workers get to finish the step and save
  // last.pt before SIGKILL (torchrun waits 30 s).
  double stop_grace_seconds = 60.0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on master_addr
  std::string argv0;    // the workers' argv[0]; empty: the executable's path
  // Captured output of a failed rank > 0 shown at most this many bytes (its tail).
  size_t max_shown_bytes = 64 * 1024;
};

// Defaults; YOLO_LAUNCH_GRACE_S (seconds), when set, replaces both grace periods (tests use a
// short one).
LaunchConfig launch_config_from_env();

// Starts `nproc` (>= 1) processes `exe args...` (no shell) with RANK = LOCAL_RANK = k, WORLD_SIZE
// = LOCAL_WORLD_SIZE = nproc, MASTER_ADDR, MASTER_PORT, OMP_NUM_THREADS = max(1, cores / nproc)
// unless already set, and TORCHELASTIC_USE_AGENT_STORE removed (rank 0 hosts the TCPStore).
// Rank 0 writes to this process's stdout/stderr; the other ranks' output is kept in a temporary
// file and printed to stderr, each line prefixed "[rankK] ", only when that rank fails.
// Each worker runs in its own session, so a Ctrl-C in the terminal reaches only the launcher, and
// signals go to the worker's process group. When a worker exits non-zero or dies, the others get
// SIGTERM, then SIGKILL after the grace period. SIGINT/SIGTERM/SIGHUP to this process are
// forwarded as SIGTERM (once; a second one, or the stop grace period running out, SIGKILLs the
// workers). Every worker is reaped before returning; workers get SIGTERM if this process dies
// (PR_SET_PDEATHSIG). Returns the exit status for the launcher: 0 when all workers succeeded, the
// failed worker's status (128 + signal when killed by one), or 128 + the signal that interrupted
// the launcher. Throws std::runtime_error when a worker cannot be started. Installs (and on return
// restores) process-wide signal handlers: one launch per process at a time.
int launch_workers(const std::string& exe, const std::vector<std::string>& args, int nproc,
                   const LaunchConfig& cfg = LaunchConfig{});

// argv[1..] without --nproc-per-node / --nproc_per_node and its value ("--flag N" or
// "--flag=N"): the workers' arguments.
std::vector<std::string> worker_args(int argc, const char* const* argv);

// The number of workers for --nproc-per-node (-1 = auto: one per visible CUDA device, or
// 2 when there is none).
int resolve_nproc(int nproc_per_node);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0).
int find_free_port();

// train's --nproc-per-node entry, once train has checked its command line: launch_workers on
// /proc/self/exe with worker_args (the command line forwarded as given). Returns the exit status.
int run_launcher(int nproc_per_node, int argc, const char* const* argv);

}  // namespace yolo

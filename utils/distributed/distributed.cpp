// The one file that includes c10d: LibTorch 1.13's ProcessGroupGloo/NCCL derive from
// c10d::ProcessGroup, 2.x's from c10d::Backend (which a ProcessGroup wraps). Both expose the same
// collectives, so the implementation holds the concrete type through `PgImpl`.
#include "utils/distributed/distributed.h"

// Debian builds LibTorch with Gloo; its header hides the class unless this is defined.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/torch.h>
#include <torch/version.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef YOLO_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "utils/core/errors.h"
#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/core/runtime/cuda_env.h"

namespace yolo {

namespace {

#if TORCH_VERSION_MAJOR >= 2
using PgImpl = c10d::Backend;
#else
using PgImpl = c10d::ProcessGroup;
#endif

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int env_int(const char* name, int fallback, int min_value) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < min_value || x > (1 << 30)) {
    throw UsageError(std::string("environment variable ") + name + "='" + v +
                     "' is not a valid value (an integer >= " + std::to_string(min_value) +
                     "); unset it or launch with torchrun");
  }
  return static_cast<int>(x);
}

// Every rank bumps a counter in the store once a second, on a connection of its own (the main
// one may sit in a long wait), and watches its peers' counters: a peer whose counter stands still
// for the collective timeout (stopped, hung, cut off) ends this rank with exit 1 and one line
// naming it, whatever the main thread waits in (a Gloo or NCCL collective, a store wait for a
// share of validation). NCCL's own wait() only makes the stream wait, so without this a hung
// NCCL peer would end in its watchdog's SIGABRT with nothing said. A rank that ends normally says
// so in the store first, so its silence afterwards is not taken for a hang.
class Heartbeat {
 public:
  Heartbeat(const DistEnv& env, std::chrono::milliseconds timeout)
      : env_(env), timeout_(timeout), watched_(watched_peers(env)) {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env.master_port);
    so.isServer = false;
    so.timeout = timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    store_ = c10::make_intrusive<c10d::PrefixStore>(
        "/yolo_heartbeat/attempt_" + std::to_string(env.restart_count), store_);
    thread_ = std::thread([this] { run(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // This rank is ending (normally or with its own error, which it reports itself): its peers stop
  // watching it. Never throws.
  void say_done() const {
    try {
      store_->set(done_key(env_.rank), std::vector<uint8_t>{1});
    } catch (const std::exception&) {
      // The store is gone: nobody is watching any more.
    }
  }

  // The ranks whose counter stands still over `window`, as "rank 1, rank 3"; "" if none or unknown.
  std::string silent_ranks(std::chrono::milliseconds window) const {
    try {
      std::vector<int64_t> before;
      for (int r = 0; r < env_.world_size; ++r) before.push_back(store_->add(key(r), 0));
      std::this_thread::sleep_for(window);
      std::string out;
      for (int r = 0; r < env_.world_size; ++r) {
        if (r != env_.rank && store_->add(key(r), 0) == before[r]) {
          out += (out.empty() ? "rank " : ", rank ") + std::to_string(r);
        }
      }
      return out;
    } catch (const std::exception&) {
      // Without torchrun's agent, rank 0 hosts the store: it is gone with rank 0.
      return env_.agent_store || env_.rank == 0 ? "" : "rank 0 (it hosted the store)";
    }
  }

 private:
  static std::string key(int rank) { return "hb/" + std::to_string(rank); }
  static std::string done_key(int rank) { return "done/" + std::to_string(rank); }

  // Every peer in worlds of up to 32 ranks; beyond, the neighbours on a ring and rank 0, so the
  // store answers O(world) reads a second: a silent rank still ends its watchers, and the
  // launcher then ends the rest.
  static std::vector<int> watched_peers(const DistEnv& env) {
    const int w = env.world_size, r = env.rank;
    std::vector<int> peers;
    if (w <= 32) {
      for (int k = 0; k < w; ++k)
        if (k != r) peers.push_back(k);
      return peers;
    }
    for (int k : {(r + w - 1) % w, (r + 1) % w, 0})
      if (k != r && std::find(peers.begin(), peers.end(), k) == peers.end()) peers.push_back(k);
    return peers;
  }

  [[noreturn]] void end_rank(const std::string& cause) const {
    const std::string msg = "rank " + std::to_string(env_.rank) + ": " + cause +
                            "; ending this rank (--dist-timeout " +
                            std::to_string(timeout_.count() / 1000) + " s)";
    log_error(msg);
    write_elastic_error_file(env_.error_file, "RuntimeError", msg);
    std::fflush(nullptr);
    std::_Exit(1);  // the main thread may be blocked in a collective that never returns
  }

  void run() {
    using Clock = std::chrono::steady_clock;
    std::vector<int64_t> count(watched_.size(), -1);
    std::vector<Clock::time_point> changed(watched_.size(), Clock::now());
    std::vector<bool> done(watched_.size(), false);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const auto t0 = Clock::now();
      try {
        store_->add(key(env_.rank), 1);
        for (size_t i = 0; i < watched_.size() && !stop_; ++i) {
          if (done[i] || (done[i] = store_->check({done_key(watched_[i])}))) continue;
          const int64_t c = store_->add(key(watched_[i]), 0);
          const auto now = Clock::now();
          if (c != count[i]) {
            count[i] = c;
            changed[i] = now;
          } else if (now - changed[i] > timeout_) {
            end_rank(
                "lost rank " + std::to_string(watched_[i]) + " (no heartbeat for " +
                std::to_string(
                    std::chrono::duration_cast<std::chrono::seconds>(now - changed[i]).count()) +
                " s: stopped, hung or cut off from the network)");
          }
        }
      } catch (const std::exception&) {
        // A store that went away at once is a rank 0 that ended (the collectives report a crash);
        // one that stopped answering for the whole timeout is a stopped or hung store host.
        if (!stop_ && !env_.agent_store && env_.rank != 0 && Clock::now() - t0 >= timeout_) {
          end_rank("rank 0, which hosts the rendezvous store, did not answer for " +
                   std::to_string(timeout_.count() / 1000) +
                   " s (stopped, hung or cut off from the network)");
        }
        return;
      }
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
    }
  }

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  std::vector<int> watched_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// What `e` says, without the stack trace a c10::Error carries.
std::string message_of(const std::exception& e) {
  const auto* ce = dynamic_cast<const c10::Error*>(&e);
  return ce ? ce->what_without_backtrace() : e.what();
}

// Its first line only, for errors wrapped into one line of our own.
std::string without_backtrace(const std::exception& e) {
  const std::string m = message_of(e);
  return m.substr(0, m.find('\n'));
}

// A failed collective almost always means another rank is gone: name it when the heartbeats can.
[[noreturn]] void collective_failed(int rank, const char* op, const std::exception& e,
                                    const Heartbeat* hb) {
  const std::string silent = hb ? hb->silent_ranks(std::chrono::milliseconds(2500)) : "";
  throw std::runtime_error(
      "rank " + std::to_string(rank) + ": " + op + " failed (" + message_of(e) + "): " +
      (silent.empty() ? "another rank stopped (error, crash or kill; torchrun's summary names it)"
                        " or did not answer within --dist-timeout"
                      : "lost " + silent + " (no heartbeat for 2.5 s: killed, crashed or hung)"));
}

class C10dWork : public CommWork {
 public:
  C10dWork(c10::intrusive_ptr<c10d::Work> w, int rank, std::shared_ptr<const Heartbeat> hb)
      : work_(std::move(w)), rank_(rank), hb_(std::move(hb)) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      collective_failed(rank_, "all-reduce", e, hb_.get());
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  int rank_;
  std::shared_ptr<const Heartbeat> hb_;
};

class C10dGroup : public ProcessGroup {
 public:
  C10dGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Store> job_store,
            c10::intrusive_ptr<PgImpl> pg, std::shared_ptr<const Heartbeat> hb, int rank, int size,
            std::string backend)
      : store_(std::move(store)),
        job_store_(std::move(job_store)),
        pg_(std::move(pg)),
        hb_(std::move(hb)),
        rank_(rank),
        size_(size),
        backend_(std::move(backend)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }

  std::unique_ptr<CommWork> allreduce_sum_async(at::Tensor t) override {
    std::vector<at::Tensor> v{std::move(t)};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    PgImpl& pg = impl();
    try {
      return std::make_unique<C10dWork>(pg.allreduce(v, o), rank_, hb_);
    } catch (const std::exception& e) {
      collective_failed(rank_, "all-reduce", e, hb_.get());
    }
  }
  void broadcast(at::Tensor t, int root) override {
    std::vector<at::Tensor> v{std::move(t)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    PgImpl& pg = impl();
    try {
      pg.broadcast(v, o)->wait();
    } catch (const std::exception& e) {
      collective_failed(rank_, "broadcast", e, hb_.get());
    }
  }
  void barrier() override {
    PgImpl& pg = impl();
    try {
      pg.barrier()->wait();
    } catch (const std::exception& e) {
      collective_failed(rank_, "barrier", e, hb_.get());
    }
  }
  void store_set(const std::string& key, const std::string& value) override {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string store_get(const std::string& key, std::chrono::milliseconds timeout) override {
    store_->wait({key}, timeout);
    const std::vector<uint8_t> v = store_->get(key);
    return std::string(v.begin(), v.end());
  }
  int64_t store_add(const std::string& key, int64_t n) override { return store_->add(key, n); }
  void store_delete(const std::string& key) override { store_->deleteKey(key); }
  void job_store_set(const std::string& key, const std::string& value) override {
    job_store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string job_store_get_or(const std::string& key, const std::string& fallback) override {
    if (!job_store_->check({key})) return fallback;
    const std::vector<uint8_t> v = job_store_->get(key);
    return std::string(v.begin(), v.end());
  }
  void shutdown() override {
    if (!pg_) return;
    if (hb_) hb_->say_done();
#if TORCH_VERSION_MAJOR >= 2
    // 2.x's NCCL group warns at exit, and may abort, when destroyed without a shutdown.
    try {
      pg_->shutdown();
    } catch (const std::exception&) {
      // Exiting anyway: a peer that is already gone cannot be shut down cleanly.
    }
#endif
    pg_.reset();
  }
  void abort() override {
    if (!pg_) return;
    if (hb_) hb_->say_done();
#if TORCH_VERSION_MAJOR >= 2
    try {
      pg_->abort();  // unlike shutdown, never waits for kernels that wait for a lost peer
    } catch (const std::exception&) {
    }
#endif
    pg_.reset();
  }
  // Destroyed while an error unwinds (a peer lost, a bad image): abort, which cannot block.
  ~C10dGroup() override {
    if (std::uncaught_exceptions() > 0) {
      abort();
    } else {
      shutdown();
    }
  }

 private:
  PgImpl& impl() const {
    if (!pg_) throw std::logic_error("a collective after the process group was shut down");
    return *pg_;
  }

  c10::intrusive_ptr<c10d::Store> store_, job_store_;
  c10::intrusive_ptr<PgImpl> pg_;
  std::shared_ptr<const Heartbeat> hb_;
  int rank_, size_;
  std::string backend_;
};

// Every rank says it is here and waits for the others, saying once whom it waits for and where:
// without it a missing rank shows only as a silent wait and a library stack trace at the timeout.
void rendezvous(c10d::Store& store, const DistEnv& env, std::chrono::milliseconds timeout) {
  auto key = [](int r) { return "arrived/" + std::to_string(r); };
  store.set(key(env.rank), std::vector<uint8_t>{1});
  const auto start = std::chrono::steady_clock::now();
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  const std::string me = "rank " + std::to_string(env.rank) + ": ";
  const std::string of_world = " of WORLD_SIZE=" + std::to_string(env.world_size);
  const std::string fix = "start them (torchrun --nproc_per_node " +
                          std::to_string(env.world_size) + " starts all ranks; train " +
                          "--nproc-per-node N starts them without torchrun)";
  bool said = false;
  while (true) {
    std::vector<int> missing;
    for (int r = 0; r < env.world_size; ++r) {
      if (!store.check({key(r)})) missing.push_back(r);
    }
    if (missing.empty()) return;
    std::string who = missing.size() > 1 ? "ranks " : "rank ";
    for (size_t i = 0; i < missing.size(); ++i) who += (i ? ", " : "") + std::to_string(missing[i]);
    who += of_world;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout) {
      throw std::runtime_error(
          me + who + " did not join at " + where + " within --dist-timeout (" +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
          " s); " + fix);
    }
    if (!said && waited > std::chrono::seconds(2)) {
      log_info(me + "waiting at " + where + " for " + who + "; " + fix);
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// A rank that connects to rank 0's store first resolves MASTER_ADDR and waits until something
// listens at MASTER_PORT (rank 0 may start after it), so that a wrong name or a rank 0 that never
// came is said as such, in one line, rather than by the store client's retry warnings.
void wait_for_listener(const DistEnv& env, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(env.master_port);
  const int rc = ::getaddrinfo(env.master_addr.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    throw std::runtime_error("MASTER_ADDR=" + env.master_addr + " does not resolve (" +
                             ::gai_strerror(rc) +
                             "); set MASTER_ADDR to rank 0's host name or address");
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int error = 0;
  for (;;) {
    for (const addrinfo* a = addresses.get(); a; a = a->ai_next) {
      const int fd =
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) {
        error = errno;
        continue;
      }
      int result = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (result == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        socklen_t len = sizeof(result);
        result =
            ::poll(&p, 1, 1000) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &len) == 0
                ? result
                : ETIMEDOUT;
      }
      ::close(fd);
      if (result == 0) return;
      error = result;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw std::runtime_error(
      "nothing accepted a connection at " + env.master_addr + ":" + port +
      " within --dist-timeout (" +
      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
      " s; last: " + std::strerror(error) +
      "): rank 0 is not running there; start all ranks together (torchrun --nproc_per_node N, or "
      "train --nproc-per-node N), or check MASTER_ADDR and MASTER_PORT");
}

// The rendezvous store, made on a thread of its own: a client whose connection is accepted by
// something that never answers (another program on MASTER_PORT) waits in the store's handshake
// without a deadline. Past --dist-timeout that thread is left blocked, the error ends the run.
c10::intrusive_ptr<c10d::Store> connect_store(const DistEnv& env,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  // torchrun's agent already serves the store; otherwise rank 0 does (our own launcher).
  so.isServer = !env.agent_store && env.rank == 0;
  if (so.isServer) so.numWorkers = static_cast<size_t>(env.world_size);
  so.waitWorkers = false;
  so.timeout = timeout;
  if (!so.isServer) wait_for_listener(env, timeout);
  using Made = std::promise<c10::intrusive_ptr<c10d::Store>>;
  auto made = std::make_shared<Made>();
  auto ready = made->get_future();
  std::thread([made, so, addr = env.master_addr] {
    try {
      made->set_value(c10::make_intrusive<c10d::TCPStore>(addr, so));
    } catch (...) {
      made->set_exception(std::current_exception());
    }
  }).detach();
  // A little past the store's own connect timeout, so its message wins when it has one.
  if (ready.wait_for(timeout + std::chrono::seconds(2)) != std::future_status::ready) {
    throw std::runtime_error(
        "no answer within --dist-timeout (" +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
        " s): a program that is not a rendezvous store accepts connections on that port");
  }
  return ready.get();
}

}  // namespace

DistEnv read_dist_env(int cli_local_rank) {
  DistEnv e;
  e.local_rank = env_int("LOCAL_RANK", cli_local_rank, -1);
  // torchrun (and the legacy launcher with --local_rank) sets all three. A part of them is a
  // shell left over from another job, or a launcher that is not torchrun: training as one
  // process, or as a world of one, would quietly not be the run the user asked for.
  const bool has_world = !env_or("WORLD_SIZE", "").empty();
  const bool has_rank = !env_or("RANK", "").empty();
  const bool has_local = e.local_rank != -1;
  const bool partial =
      (has_world || has_rank || has_local) && !(has_world && has_rank && has_local);
  // WORLD_SIZE=1 alone says "one process", which is what runs.
  if (partial && (has_rank || has_local || env_int("WORLD_SIZE", 1, 1) > 1)) {
    std::vector<std::string> set, unset;
    for (auto [name, here] : {std::pair<const char*, bool>{"WORLD_SIZE", has_world},
                              {"RANK", has_rank},
                              {"LOCAL_RANK", has_local}}) {
      (here ? set : unset).push_back(name);
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? (i + 1 == v.size() ? " and " : ", ") : "") + v[i];
      return s + (v.size() > 1 ? " are" : " is");
    };
    throw UsageError("a partial distributed environment: " + list(set) + " set but " + list(unset) +
                     " not; launch with torchrun (it sets them all) or train --nproc-per-node N, "
                     "or unset them to train as one process");
  }
  if (e.local_rank == -1) return e;  // a single process
  e.world_size = env_int("WORLD_SIZE", 1, 1);
  e.rank = env_int("RANK", e.local_rank, 0);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", e.world_size, 1);
  if (e.rank >= e.world_size || e.local_rank >= e.local_world_size) {
    throw UsageError(
        "RANK=" + std::to_string(e.rank) + ", LOCAL_RANK=" + std::to_string(e.local_rank) +
        " do not fit WORLD_SIZE=" + std::to_string(e.world_size) +
        ", LOCAL_WORLD_SIZE=" + std::to_string(e.local_world_size) + "; launch with torchrun");
  }
  e.master_addr = env_or("MASTER_ADDR", "127.0.0.1");
  e.master_port = env_int("MASTER_PORT", 29500, 1);
  if (e.master_port > 65535) throw UsageError("MASTER_PORT must be a TCP port (1-65535)");
  e.agent_store = env_or("TORCHELASTIC_USE_AGENT_STORE", "") == "True";
  e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0, 0);
  e.error_file = env_or("TORCHELASTIC_ERROR_FILE", "");
  return e;
}

std::shared_ptr<ProcessGroup> init_process_group(const DistEnv& env, const std::string& backend,
                                                 std::chrono::milliseconds timeout,
                                                 const c10::Device& device) {
  if (backend != "gloo" && backend != "nccl") {
    throw UsageError("--dist-backend must be nccl or gloo, not '" + backend + "'");
  }
  if (backend == "nccl") {
    if (!nccl_compiled()) {
      throw UsageError(
          "--dist-backend nccl: this build has no NCCL (its LibTorch has no CUDA); rebuild with "
          "the default LibTorch (scripts/setup.sh), or use --dist-backend gloo");
    }
    if (!device.is_cuda()) {
      throw UsageError("--dist-backend nccl needs a CUDA device per rank; this rank runs on " +
                       device.str() + " (use --dist-backend gloo, or --device with GPUs)");
    }
  }
  // Before any collective: NCCL and the caching allocator work on the current device.
  set_current_cuda_device(device);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = connect_store(env, timeout);
  } catch (const std::exception& ex) {
    throw std::runtime_error("rank " + std::to_string(env.rank) +
                             ": cannot reach the rendezvous store at " + env.master_addr + ":" +
                             std::to_string(env.master_port) + " (" + without_backtrace(ex) +
                             "); check MASTER_ADDR/MASTER_PORT and that the port is free");
  }
  // torchrun's agent store outlives a restart of the workers: keys are per attempt (as Python's
  // env:// rendezvous does), then per purpose.
  const auto job_store = c10::make_intrusive<c10d::PrefixStore>("yolo_job", store);
  if (env.agent_store) {
    store = c10::make_intrusive<c10d::PrefixStore>(
        "/worker/attempt_" + std::to_string(env.restart_count), store);
  }
  store = c10::make_intrusive<c10d::PrefixStore>("yolo", store);
  try {
    rendezvous(*store, env, timeout);
  } catch (const c10::Error& ex) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": the rendezvous store at " +
                             env.master_addr + ":" + std::to_string(env.master_port) + " failed (" +
                             without_backtrace(ex) + ")");
  }
  c10::intrusive_ptr<PgImpl> pg;
  try {
    if (backend == "gloo") {
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      const std::string ifname = env_or("GLOO_SOCKET_IFNAME", "");
      opts->devices.push_back(ifname.empty()
                                  ? c10d::ProcessGroupGloo::createDefaultDevice()
                                  : c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
    } else {
#ifdef YOLO_WITH_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      auto nccl =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, opts);
#if TORCH_VERSION_MAJOR >= 2
      // As init_process_group(device_id=...): one communicator, for this rank's device, made now
      // so a broken NCCL set-up fails here rather than in the first all-reduce.
      nccl->setBoundDeviceId(device);
      nccl->eagerConnectSingleDevice(device);
#endif
      pg = nccl;
#endif
    }
  } catch (const std::exception& ex) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": cannot create the " + backend +
                             " process group of " + std::to_string(env.world_size) + " ranks (" +
                             without_backtrace(ex) + ")");
  }
  std::shared_ptr<const Heartbeat> hb;
  try {
    hb = std::make_shared<Heartbeat>(env, timeout);
  } catch (const std::exception&) {
    // Diagnostics only: without them a failure is still reported, without the lost rank's number.
  }
  return std::make_shared<C10dGroup>(store, job_store, pg, std::move(hb), env.rank, env.world_size,
                                     backend);
}

void broadcast_coalesced(ProcessGroup& pg, const std::vector<at::Tensor>& tensors, int root) {
  if (pg.size() < 2) return;
  std::map<std::pair<int, std::string>, std::vector<at::Tensor>> by_kind;
  for (const auto& t : tensors) {
    if (t.defined() && t.numel() > 0) {
      by_kind[{static_cast<int>(t.scalar_type()), t.device().str()}].push_back(t);
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& kv : by_kind) {
    std::vector<at::Tensor> flat;
    for (const auto& t : kv.second) flat.push_back(t.detach().reshape(-1));
    at::Tensor buf = torch::cat(flat);
    pg.broadcast(buf, root);
    int64_t off = 0;
    for (auto& t : kv.second) {
      const int64_t n = t.numel();
      t.detach().copy_(buf.slice(0, off, off + n).view(t.sizes()));
      off += n;
    }
  }
}

void write_elastic_error_file(const std::string& path, const std::string& type,
                              const std::string& message) {
  if (path.empty()) return;
  // torch.distributed.elastic reads {"message": {"message": ..., "extraInfo": {...,
  // "timestamp": ...}}} and reports the earliest failure across ranks.
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return;
  const std::string text = type + ": " + message;
  std::fprintf(f,
               "{\"message\": {\"message\": %s, \"extraInfo\": {\"py_callstack\": %s, "
               "\"timestamp\": \"%lld\"}}}",
               json_quote(text).c_str(), json_quote(text).c_str(),
               static_cast<long long>(std::time(nullptr)));
  std::fclose(f);
}

}  // namespace yolo

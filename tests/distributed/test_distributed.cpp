// Launcher environment parsing and gradient bucketing, on one process (the multi-process tests
// run under torchrun from tests/distributed).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>

#include "tests/distributed/mirror_group.h"
#include "utils/core/errors.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/distributed/distributed.h"
#include "utils/distributed/grad_sync.h"

using namespace yolo;

namespace {

class EnvGuard {
 public:
  EnvGuard() {
    for (const char* k : kVars) unsetenv(k);
  }
  ~EnvGuard() {
    for (const char* k : kVars) unsetenv(k);
  }

 private:
  static constexpr const char* kVars[] = {"LOCAL_RANK",
                                          "RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_WORLD_SIZE",
                                          "MASTER_ADDR",
                                          "MASTER_PORT",
                                          "TORCHELASTIC_USE_AGENT_STORE",
                                          "TORCHELASTIC_RESTART_COUNT"};
};

using yolo::test_support::MirrorGroup;

}  // namespace

TEST(DistEnv, SingleProcessWithoutLocalRank) {
  EnvGuard g;
  const DistEnv e = read_dist_env();
  EXPECT_FALSE(e.distributed());
  EXPECT_TRUE(e.is_rank0());
  EXPECT_EQ(e.world_size, 1);
}

TEST(DistEnv, ReadsTorchrunVariables) {
  EnvGuard g;
  setenv("LOCAL_RANK", "1", 1);
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "10.0.0.5", 1);
  setenv("MASTER_PORT", "29511", 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
  const DistEnv e = read_dist_env();
  EXPECT_TRUE(e.distributed());
  EXPECT_FALSE(e.is_rank0());
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "10.0.0.5");
  EXPECT_EQ(e.master_port, 29511);
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.restart_count, 2);
}

TEST(DistEnv, LegacyLocalRankFlag) {
  EnvGuard g;
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "1", 1);
  const DistEnv e = read_dist_env(1);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.rank, 1);
  EXPECT_FALSE(e.agent_store);
}

TEST(DistEnv, MalformedValuesNameTheVariable) {
  EnvGuard g;
  setenv("LOCAL_RANK", "zero", 1);
  try {
    read_dist_env();
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("LOCAL_RANK"), std::string::npos) << e.what();
  }
  setenv("LOCAL_RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  EXPECT_THROW(read_dist_env(), UsageError);
  setenv("RANK", "0", 1);
  setenv("MASTER_PORT", "70000", 1);
  EXPECT_THROW(read_dist_env(), UsageError);
}

// torchrun sets WORLD_SIZE, RANK and LOCAL_RANK together; any part of them alone is refused, naming
// what is set and what is missing, rather than training as one process or a world of one.
TEST(DistEnv, PartialEnvironmentIsRefused) {
  EnvGuard g;
  auto message = [] {
    try {
      read_dist_env();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_NE(message().find("WORLD_SIZE is set but RANK and LOCAL_RANK are not"), std::string::npos)
      << message();
  setenv("RANK", "0", 1);
  EXPECT_NE(message().find("WORLD_SIZE and RANK are set but LOCAL_RANK is not"), std::string::npos)
      << message();
  unsetenv("WORLD_SIZE");
  setenv("LOCAL_RANK", "0", 1);
  EXPECT_NE(message().find("RANK and LOCAL_RANK are set but WORLD_SIZE is not"), std::string::npos)
      << message();
  unsetenv("RANK");
  EXPECT_NE(message().find("LOCAL_RANK is set but"), std::string::npos) << message();
  // WORLD_SIZE=1 alone means one process, and one process runs.
  unsetenv("LOCAL_RANK");
  setenv("WORLD_SIZE", "1", 1);
  EXPECT_FALSE(read_dist_env().distributed());
}

TEST(GradSync, BucketsInReverseOrderWithCapsAndAverages) {
  auto pg = std::make_shared<MirrorGroup>();
  // Reverse order, 4-byte floats: a bucket closes once it holds >= its cap. The first (cap 1000
  // bytes) takes the last parameter (1200 bytes); the next ones (cap 1600) 200 + 400, 400, 400.
  std::vector<at::Tensor> params;
  for (int64_t n : {400, 400, 400, 200, 300}) {
    params.push_back(torch::randn({n}).requires_grad_(true));
  }
  GradSync sync(pg, params, 1600, 1000);
  EXPECT_EQ(sync.num_buckets(), 4u);
  for (int step = 0; step < 2; ++step) {
    sync.set_sync(true);
    for (auto& p : params) p.mutable_grad().reset();
    at::Tensor loss = torch::zeros({});
    for (size_t k = 0; k < params.size(); ++k) loss = loss + (params[k] * (k + 1.0)).sum();
    loss.backward();
    if (step == 0) {
      EXPECT_TRUE(pg->sizes.empty());  // the first backward launches nothing
    } else {
      EXPECT_EQ(pg->sizes, (std::vector<int64_t>{300, 600, 400, 400}));  // from the hooks
    }
    sync.finish();
    // The first finish sums which parameters each rank used, then reduces the buckets in order.
    EXPECT_EQ(pg->sizes, step == 0 ? (std::vector<int64_t>{5, 300, 600, 400, 400})
                                   : (std::vector<int64_t>{300, 600, 400, 400}));
    pg->sizes.clear();
  }
  EXPECT_TRUE(sync.unused_everywhere().empty() && sync.unused_somewhere().empty());
  // The mirror rank has the same gradients: the average is this rank's gradient.
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_TRUE(torch::allclose(params[k].grad(), torch::full_like(params[k], k + 1.0)));
  }
}

TEST(GradSync, NoSyncAccumulatesAndTheNextSyncReducesTheSum) {
  auto pg = std::make_shared<MirrorGroup>();
  std::vector<at::Tensor> params{torch::ones({3}).requires_grad_(true),
                                 torch::ones({2}).requires_grad_(true)};
  GradSync sync(pg, params);
  sync.set_sync(false);
  (params[0] * 2).sum().backward();
  EXPECT_TRUE(pg->sizes.empty());  // nothing reduced on an accumulating batch
  sync.set_sync(true);
  (params[0] * 3).sum().backward();  // params[1] unused on both ranks: no gradient at all
  sync.finish();
  EXPECT_EQ(pg->sizes, (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(torch::allclose(params[0].grad(), torch::full({3}, 5.0)));
  EXPECT_FALSE(params[1].grad().defined());
  EXPECT_EQ(sync.unused_everywhere(), std::vector<size_t>{1});
}

namespace {
// Rank 0 of 2 whose peer uses only some parameters: the peer's part of each all-reduce is queued
// by the test (zeros when none is).
class PeerGroup : public MirrorGroup {
 public:
  std::unique_ptr<CommWork> allreduce_sum_async(at::Tensor t) override {
    sizes.push_back(t.numel());
    if (!peer.empty()) {
      t.add_(peer.front());
      peer.erase(peer.begin());
    }
    return std::make_unique<Done>();
  }
  std::vector<at::Tensor> peer;
};
}  // namespace

// A parameter used on this rank only is reduced in a late bucket after backward (so collectives
// inside backward keep one order on every rank); one used nowhere keeps no gradient.
TEST(GradSync, ParametersUnusedOnSomeRanksGoLateAndUnusedEverywhereGetNoGradient) {
  auto pg = std::make_shared<PeerGroup>();
  std::vector<at::Tensor> params{torch::ones({3}).requires_grad_(true),
                                 torch::ones({2}).requires_grad_(true),
                                 torch::ones({4}).requires_grad_(true)};
  GradSync sync(pg, params, 0, 1 << 20, {"a", "b", "c"});
  EXPECT_EQ(sync.bucket_cap_bytes(), 1 << 20);         // a tiny model: the 1 MB floor
  pg->peer.push_back(torch::tensor({1.f, 0.f, 0.f}));  // the peer uses `a` only
  sync.set_sync(true);
  (params[0] * 2 + params[1].sum()).sum().backward();
  sync.finish();
  EXPECT_EQ(sync.unused_somewhere(), std::vector<size_t>{1});
  EXPECT_EQ(sync.unused_everywhere(), std::vector<size_t>{2});
  EXPECT_TRUE(torch::allclose(params[0].grad(), torch::full({3}, 1.0)));  // (2 + 0) / 2
  EXPECT_TRUE(torch::allclose(params[1].grad(), torch::full({2}, 1.5)));  // (3 + 0) / 2
  EXPECT_FALSE(params[2].grad().defined());
  EXPECT_EQ(sync.num_buckets(), 2u);  // `a`'s, then the late one with `b`; `c` in none
  pg->sizes.clear();
  for (auto& p : params) p.mutable_grad().reset();
  sync.set_sync(true);
  (params[0] * 2 + params[1].sum()).sum().backward();
  EXPECT_EQ(pg->sizes, std::vector<int64_t>{3});  // `a` from its hook; `b` waits
  sync.finish();
  EXPECT_EQ(pg->sizes, (std::vector<int64_t>{3, 2}));
  EXPECT_FALSE(params[2].grad().defined());
}

TEST(GradSync, BucketCapsFollowTheModel) {
  auto pg = std::make_shared<MirrorGroup>();
  // 16 MB of gradients (yolov5s has 28): 2 MB buckets, an eighth, so backward overlaps them.
  std::vector<at::Tensor> params;
  for (int i = 0; i < 16; ++i) params.push_back(torch::zeros({1 << 18}).requires_grad_(true));
  GradSync sync(pg, params);
  EXPECT_EQ(sync.bucket_cap_bytes(), 2 << 20);
  EXPECT_EQ(sync.num_buckets(), 9u);  // the first (1 MB), 7 of 2 MB, the rest (1 MB)
}

namespace {
// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

yolo::DistEnv single_rank_env() {
  yolo::DistEnv env;
  env.local_rank = env.rank = 0;
  env.world_size = env.local_world_size = 1;
  env.master_port = free_port();
  return env;
}

std::string usage_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const yolo::UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// NCCL is only ever chosen explicitly and where it can work: a build without it, or a rank on
// the CPU, is a usage error that says what to do instead, before any connection is tried.
TEST(ProcessGroup, NcclWhereItCannotWorkIsAUsageErrorNamingTheFix) {
  const yolo::DistEnv env = single_rank_env();
  const std::string cpu = usage_message([&] {
    yolo::init_process_group(env, "nccl", std::chrono::seconds(5), torch::Device("cpu"));
  });
  EXPECT_NE(cpu.find("--dist-backend gloo"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find(yolo::nccl_compiled() ? "CUDA device" : "no NCCL"), std::string::npos) << cpu;
  const std::string bad = usage_message(
      [&] { yolo::init_process_group(env, "mpi", std::chrono::seconds(5), torch::Device("cpu")); });
  EXPECT_NE(bad.find("--dist-backend must be nccl or gloo"), std::string::npos) << bad;
}

// A group is shut down before it is destroyed (no NCCL watchdog complaints at exit); after that a
// collective is an error, never a crash.
TEST(ProcessGroup, ShutdownEndsTheGroupCleanly) {
  const yolo::DistEnv env = single_rank_env();
  ASSERT_GT(env.master_port, 0);
  auto pg = yolo::init_process_group(env, "gloo", std::chrono::seconds(20));
  torch::Tensor t = torch::ones({3});
  pg->allreduce_sum(t);
  EXPECT_TRUE(torch::equal(t, torch::ones({3})));  // one rank: the sum is itself
  pg->shutdown();
  pg->shutdown();  // twice is harmless
  EXPECT_THROW(pg->allreduce_sum(t), std::logic_error);
  pg.reset();
}

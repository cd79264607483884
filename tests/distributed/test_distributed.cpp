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
  sync.set_sync(true);
  at::Tensor loss = torch::zeros({});
  for (size_t k = 0; k < params.size(); ++k) loss = loss + (params[k] * (k + 1.0)).sum();
  loss.backward();
  sync.finish();
  EXPECT_EQ(pg->sizes, (std::vector<int64_t>{300, 600, 400, 400}));
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
  (params[0] * 3).sum().backward();  // params[1] unused: reduced as zeros, not forgotten
  sync.finish();
  EXPECT_EQ(pg->sizes, std::vector<int64_t>{5});
  EXPECT_TRUE(torch::allclose(params[0].grad(), torch::full({3}, 5.0)));
  EXPECT_TRUE(torch::allclose(params[1].grad(), torch::zeros({2})));
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

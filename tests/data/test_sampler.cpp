// DistributedSampler: PyTorch's order, coverage and padding across ranks, epochs.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "data/sampler.h"

using namespace yolo;

TEST(Sampler, SingleProcessNoShuffleIsIdentity) {
  DistributedSampler s(5, 1, 0, false);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.num_samples(), 5);
}

TEST(Sampler, ShuffleMatchesTorchRandperm) {
  DistributedSampler s(17, 1, 0, true, 7);
  s.set_epoch(3);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(10);
  const at::Tensor perm = at::randperm(17, gen, at::TensorOptions().dtype(at::kLong));
  const auto idx = s.indices();
  ASSERT_EQ(idx.size(), 17u);
  for (int i = 0; i < 17; ++i) EXPECT_EQ(idx[i], perm[i].item<int64_t>());
}

TEST(Sampler, EpochsReshuffleDeterministically) {
  DistributedSampler a(50, 1, 0, true, 1), b(50, 1, 0, true, 1);
  a.set_epoch(0);
  b.set_epoch(0);
  EXPECT_EQ(a.indices(), b.indices());
  b.set_epoch(1);
  EXPECT_NE(a.indices(), b.indices());
  auto sorted = b.indices();
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(Sampler, RanksCoverEveryIndexWithHeadPadding) {
  for (int world : {2, 3, 4}) {
    for (int n : {1, 7, 10, 12}) {
      std::map<int64_t, int> seen;
      std::vector<int64_t> merged;
      const int64_t per_rank = (n + world - 1) / world;
      std::vector<std::vector<int64_t>> by_rank;
      for (int r = 0; r < world; ++r) {
        DistributedSampler s(n, world, r, true, 5);
        s.set_epoch(2);
        by_rank.push_back(s.indices());
        ASSERT_EQ(static_cast<int64_t>(by_rank.back().size()), per_rank);
        EXPECT_EQ(s.total_size(), per_rank * world);
        for (auto i : by_rank.back()) ++seen[i];
      }
      EXPECT_EQ(static_cast<int>(seen.size()), n) << "world " << world << " n " << n;
      // Interleave back into the padded permutation: the tail repeats its head.
      for (int64_t k = 0; k < per_rank; ++k) {
        for (int r = 0; r < world; ++r) merged.push_back(by_rank[r][k]);
      }
      for (size_t k = n; k < merged.size(); ++k) EXPECT_EQ(merged[k], merged[(k - n) % n]);
    }
  }
}

TEST(Sampler, DropLastAndBadRank) {
  DistributedSampler s(10, 3, 1, false, 0, true);
  EXPECT_EQ(s.num_samples(), 3);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_THROW(DistributedSampler(10, 2, 2), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 0, 0), std::invalid_argument);
}

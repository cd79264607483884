#pragma once
// The processes of a distributed job as the data and evaluation layers see them: byte messages
// between ranks through the job's rendezvous store (utils/distributed implements it), so that
// work such as checking labels is split across the ranks instead of done by rank 0 alone.
#include <string>
#include <vector>

namespace yolo {

class RankExchange {
 public:
  virtual ~RankExchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's place among the ranks on its machine (torchrun's LOCAL_RANK, LOCAL_WORLD_SIZE).
  virtual int local_rank() const { return rank(); }
  virtual int local_size() const { return size(); }
  // Collective (every rank calls it, in the same order as the other exchanges, with the same
  // `what`): rank 0 gets every rank's `mine` in rank order, the others an empty list. `what` says
  // what is waited for when a rank gives up.
  virtual std::vector<std::string> gather_to_rank0(const std::string& what,
                                                   const std::string& mine) const = 0;
  // Collective: rank 0's `value` on every rank (the others' `value` is ignored).
  virtual std::string broadcast_from_rank0(const std::string& what,
                                           const std::string& value) const = 0;
};

// This share of n items for `rank` of `size`: [first, last), contiguous, in rank order.
struct RankShare {
  size_t first = 0, last = 0;
};
inline RankShare rank_share(size_t n, int rank, int size) {
  const auto at = [&](int r) { return n * static_cast<size_t>(r) / static_cast<size_t>(size); };
  return {at(rank), at(rank + 1)};
}

// Collective: every rank's `problem` ("" when none) to rank 0, and the first one (naming its
// rank) back to all, so that every rank takes the same road.
inline std::string agree_on_problem(const RankExchange& ranks, const std::string& what,
                                    const std::string& problem) {
  const std::vector<std::string> all = ranks.gather_to_rank0(what, problem);
  std::string first;
  for (size_t r = 0; r < all.size() && first.empty(); ++r) {
    if (!all[r].empty()) first = "rank " + std::to_string(r) + ": " + all[r];
  }
  return ranks.broadcast_from_rank0(what, first);
}

}  // namespace yolo

#pragma once
// Ranks as threads of one process, for the data layer's collectives (RankExchange).
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "utils/core/rank_exchange.h"

namespace yolo::test {

// Ranks as threads of this process: messages on a board guarded by a mutex.
struct Board {
  std::mutex m;
  std::condition_variable cv;
  std::map<std::string, std::string> kv;
  void put(const std::string& k, const std::string& v) {
    std::lock_guard<std::mutex> lock(m);
    kv[k] = v;
    cv.notify_all();
  }
  std::string get(const std::string& k) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return kv.count(k) > 0; });
    return kv[k];
  }
};

class ThreadRanks : public yolo::RankExchange {
 public:
  ThreadRanks(Board& b, int rank, int size) : b_(b), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> gather_to_rank0(const std::string&,
                                           const std::string& mine) const override {
    const std::string key = std::to_string(calls_++);
    b_.put(key + "/" + std::to_string(rank_), mine);
    if (rank_ != 0) return {};
    std::vector<std::string> all;
    for (int r = 0; r < size_; ++r) all.push_back(b_.get(key + "/" + std::to_string(r)));
    return all;
  }
  std::string broadcast_from_rank0(const std::string&, const std::string& value) const override {
    const std::string key = std::to_string(calls_++);
    if (rank_ == 0) b_.put(key, value);
    return b_.get(key);
  }

 private:
  Board& b_;
  int rank_, size_;
  mutable int calls_ = 0;
};

}  // namespace yolo::test

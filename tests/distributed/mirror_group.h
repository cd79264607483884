#pragma once
// A stand-in for a 2-rank process group whose other rank holds the same tensors: all-reduce sums
// double the tensor. Records each all-reduce's size, in launch order.
#include <memory>
#include <string>
#include <vector>

#include "utils/distributed/distributed.h"

namespace yolo::test_support {

class MirrorGroup : public ProcessGroup {
 public:
  struct Done : CommWork {
    void wait() override {}
  };
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "mirror"; }
  std::unique_ptr<CommWork> allreduce_sum_async(at::Tensor t) override {
    sizes.push_back(t.numel());
    t.mul_(2);
    return std::make_unique<Done>();
  }
  void broadcast(at::Tensor, int) override {}
  void barrier() override {}
  void store_set(const std::string&, const std::string&) override {}
  std::string store_get(const std::string&, std::chrono::milliseconds) override { return ""; }
  int64_t store_add(const std::string&, int64_t n) override { return n; }
  void store_delete(const std::string&) override {}
  void job_store_set(const std::string&, const std::string&) override {}
  std::string job_store_get_or(const std::string&, const std::string& f) override { return f; }
  void shutdown() override {}
  void abort() override {}
  std::vector<int64_t> sizes;
};

}  // namespace yolo::test_support

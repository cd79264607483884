#pragma once
// A loop over indices spread over threads, for the data layer's one-off passes (caching images).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace yolo {

// Runs fn(i) for i in [0, n) on `threads` threads; the first exception is rethrown.
template <typename Fn>
void parallel_for(size_t n, int threads, Fn fn) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex m;
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && static_cast<size_t>(t) < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace yolo

#include "data/shared_ram_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "data/image_cache.h"
#include "data/parallel_for.h"
#include "utils/core/format.h"
#include "utils/core/log.h"

namespace yolo {
namespace {

constexpr size_t kAlign = 64;

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string gib(int64_t bytes) {
  return format_number("%.2f", static_cast<double>(bytes) / (int64_t{1} << 30));
}

// What keeps this machine from holding `total` bytes in `dir` ("" when nothing does).
std::string space_problem(const std::string& dir, int64_t total) {
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) {
    return dir + " is not usable (" + std::strerror(errno) + ")";
  }
  const auto free_bytes = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  if (free_bytes < total) {
    const auto want = static_cast<int64_t>(std::ceil(static_cast<double>(total) / (1 << 30))) + 1;
    return dir + " has " + gib(free_bytes) + " GB free, the images need " + gib(total) +
           " GB (a Docker container's is 64 MB unless started with --shm-size=" +
           std::to_string(want) + "g or --ipc=host)";
  }
  const int64_t mem = available_memory_bytes();
  if (mem > 0 && static_cast<double>(total) * 1.1 > static_cast<double>(mem)) {
    return gib(total) + " GB RAM required, " + gib(mem) + " GB available";
  }
  return "";
}

std::string unique_token() {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return std::to_string(::getpid()) + "-" + std::to_string(now);
}

}  // namespace

std::unique_ptr<SharedRamCache> SharedRamCache::create(const std::vector<cv::Size>& sizes,
                                                       const Loader& load,
                                                       const RankExchange& ranks, int threads,
                                                       const std::string& shm_dir) {
  std::unique_ptr<SharedRamCache> c(new SharedRamCache());
  const size_t n = sizes.size();
  c->table_ = 0;
  size_t off = aligned(n * 2 * sizeof(uint32_t));
  c->offsets_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    c->offsets_[i] = off;
    off += aligned(static_cast<size_t>(sizes[i].width) * static_cast<size_t>(sizes[i].height) * 3);
  }
  c->size_ = std::max<size_t>(off, kAlign);
  const bool leader = ranks.local_rank() == 0;  // speaks for its machine
  const auto give_up = [](const std::string& why) {
    log_warn("--cache ram: " + why +
             "; not caching images (decoded images are kept in a bounded cache instead)");
    return nullptr;
  };
  std::string problem =
      leader ? space_problem(shm_dir, static_cast<int64_t>(c->size_)) : std::string();
  problem =
      agree_on_problem(ranks, "whether every machine can hold the shared --cache ram", problem);
  if (!problem.empty()) return give_up(problem);

  const std::string token = ranks.broadcast_from_rank0(
      "the shared cache's name", ranks.rank() == 0 ? unique_token() : std::string());
  const std::string path = shm_dir + "/yolo-ram-cache-" + token;
  int fd = -1;
  if (leader) {
    // Reserved up front: a write past a full tmpfs would be SIGBUS, not an error.
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      problem = path + ": " + std::strerror(errno);
    } else if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(c->size_)); err != 0) {
      problem = path + ": cannot reserve " + gib(static_cast<int64_t>(c->size_)) + " GB (" +
                std::strerror(err) + ")";
    }
  }
  problem = agree_on_problem(ranks, "the shared cache made on every machine", problem);
  if (problem.empty() && !leader) {
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) problem = path + ": " + std::strerror(errno);
  }
  if (problem.empty()) {
    void* p = ::mmap(nullptr, c->size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      problem = path + ": cannot map it (" + std::string(std::strerror(errno)) + ")";
    } else {
      c->base_ = static_cast<uint8_t*>(p);
    }
  }
  if (fd >= 0) ::close(fd);
  problem = agree_on_problem(ranks, "every rank mapped the shared cache", problem);
  if (leader) ::unlink(path.c_str());  // every local rank holds it now (or gives up)
  if (!problem.empty()) return give_up(problem);

  // This rank's share of the images, on its threads.
  auto* table = reinterpret_cast<uint32_t*>(c->base_ + c->table_);
  const RankShare share = rank_share(n, ranks.local_rank(), ranks.local_size());
  try {
    parallel_for(share.last - share.first, threads, [&](size_t k) {
      const size_t i = share.first + k;
      const cv::Mat im = load(i);
      const bool fits = im.type() == CV_8UC3 && im.isContinuous() && im.rows <= sizes[i].height &&
                        im.cols <= sizes[i].width;
      if (fits) std::memcpy(c->base_ + c->offsets_[i], im.data, im.total() * im.elemSize());
      table[2 * i] = fits ? static_cast<uint32_t>(im.rows) : 0;
      table[2 * i + 1] = fits ? static_cast<uint32_t>(im.cols) : 0;
    });
  } catch (const std::exception& e) {
    problem = e.what();
  }
  problem = agree_on_problem(ranks, "every rank's share of the shared cache", problem);
  if (!problem.empty()) throw std::runtime_error("--cache ram: " + problem);
  log_info("Cached " + std::to_string(n) + " images in shared memory (" +
           format_number("%.1f", static_cast<double>(c->size_) / (1 << 20)) +
           " MiB, one copy for the " + std::to_string(ranks.local_size()) +
           " ranks of each machine)");
  return c;
}

SharedRamCache::~SharedRamCache() {
  if (base_) ::munmap(base_, size_);
}

cv::Mat SharedRamCache::image(size_t i) const {
  const auto* table = reinterpret_cast<const uint32_t*>(base_ + table_);
  const int h = static_cast<int>(table[2 * i]), w = static_cast<int>(table[2 * i + 1]);
  if (h == 0 || w == 0) return {};
  return cv::Mat(h, w, CV_8UC3, base_ + offsets_[i]);
}

}  // namespace yolo

#include "data/label_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/file_lists.h"
#include "data/verify.h"
#include "utils/core/byte_codec.h"
#include "utils/core/format.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/log.h"

namespace yolo {
namespace {

constexpr char kMagic[8] = {'Y', 'L', 'B', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kVersion = 2;  // 2: 64-bit string lengths

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  template <typename T>
  void add_pod(T v) {
    add(&v, sizeof v);
  }
  void add_str(const std::string& s) {
    add_pod<uint64_t>(s.size());
    add(s.data(), s.size());
  }
};

void add_file_stat(Fnv& f, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    f.add_pod<int64_t>(-1);
    return;
  }
  f.add_pod<int64_t>(st.st_size);
  f.add_pod<int64_t>(st.st_mtim.tv_sec);
  f.add_pod<int64_t>(st.st_mtim.tv_nsec);
}

void report(const LabelScan& scan, const std::string& cache_path, int ranks) {
  for (const auto& m : scan.messages) log_warn(one_line(m));
  std::ostringstream s;
  s << (scan.from_cache ? "Labels from " : "Scanned labels for ") << cache_path;
  if (ranks > 1) s << " on " << ranks << " ranks";
  s << ": " << scan.found << " found, " << scan.missing << " missing, " << scan.empty << " empty, "
    << scan.corrupt << " corrupt";
  log_info(one_line(s.str()));
}

}  // namespace

bool folder_writable(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  // Honour a folder marked read-only even for root, who bypasses the permission check.
  if ((st.st_mode & 0222) == 0) return false;
  return access(dir.c_str(), W_OK) == 0;
}

uint64_t label_files_hash(const std::vector<std::string>& images, int nc) {
  Fnv f;
  f.add_pod<uint32_t>(kVersion);
  f.add_pod<int32_t>(nc);
  for (const auto& im : images) {
    const std::string lb = image_to_label_path(im);
    f.add_str(im);
    add_file_stat(f, im);
    f.add_str(lb);
    add_file_stat(f, lb);
  }
  return f.h;
}

LabelScan scan_labels(const std::vector<std::string>& images, int nc, int threads) {
  std::vector<VerifiedImage> results(images.size());
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(images.size())));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < images.size();) {
      results[i] = verify_image_label(images[i], image_to_label_path(images[i]), nc);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  LabelScan scan;
  scan.hash = label_files_hash(images, nc);
  for (auto& r : results) {
    if (!r.message.empty()) scan.messages.push_back(r.message);
    if (r.corrupt) {
      ++scan.corrupt;
      continue;
    }
    if (r.label_missing) {
      ++scan.missing;
    } else {
      ++scan.found;
      if (r.label_empty) ++scan.empty;
    }
    scan.records.push_back({std::move(r.image), r.height, r.width, std::move(r.labels)});
  }
  return scan;
}

std::string encode_label_cache(const LabelScan& scan) {
  ByteWriter w;
  w.bytes().append(kMagic, sizeof kMagic);
  w.pod<uint32_t>(kVersion);
  w.pod<uint64_t>(scan.hash);
  for (int v : {scan.found, scan.missing, scan.empty, scan.corrupt}) w.pod<int32_t>(v);
  w.pod<uint32_t>(static_cast<uint32_t>(scan.records.size()));
  for (const auto& r : scan.records) {
    w.str(r.image);
    w.pod<int32_t>(r.height);
    w.pod<int32_t>(r.width);
    w.pod<uint32_t>(static_cast<uint32_t>(r.labels.size()));
    for (const auto& l : r.labels) {
      for (float v : {l.cls, l.cx, l.cy, l.w, l.h}) w.pod<float>(v);
    }
  }
  w.pod<uint32_t>(static_cast<uint32_t>(scan.messages.size()));
  for (const auto& m : scan.messages) w.str(m);
  return std::move(w.bytes());
}

bool decode_label_cache(const std::string& bytes, uint64_t expected_hash, LabelScan& out) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return false;
  }
  const std::string body = bytes.substr(sizeof kMagic);
  ByteReader r(body);
  uint32_t version = 0, n = 0;
  LabelScan s;
  int32_t counts[4];
  if (!r.pod(version) || version != kVersion || !r.pod(s.hash) || s.hash != expected_hash) {
    return false;
  }
  for (auto& c : counts) {
    if (!r.pod(c)) return false;
  }
  s.found = counts[0], s.missing = counts[1], s.empty = counts[2], s.corrupt = counts[3];
  // Bound counts by the bytes left so a damaged or hostile cache cannot demand a huge allocation.
  if (!r.pod(n) || n > body.size()) return false;
  s.records.resize(n);
  for (auto& rec : s.records) {
    uint32_t nl = 0;
    if (!r.str(rec.image) || !r.pod(rec.height) || !r.pod(rec.width) || !r.pod(nl)) return false;
    if (nl > body.size()) return false;
    rec.labels.resize(nl);
    for (auto& l : rec.labels) {
      if (!r.pod(l.cls) || !r.pod(l.cx) || !r.pod(l.cy) || !r.pod(l.w) || !r.pod(l.h)) {
        return false;
      }
    }
  }
  if (!r.pod(n) || n > body.size()) return false;
  s.messages.resize(n);
  for (auto& m : s.messages) {
    if (!r.str(m)) return false;
  }
  if (!r.at_end()) return false;
  s.from_cache = true;
  out = std::move(s);
  return true;
}

namespace {

bool try_read_cache(const std::string& path, uint64_t hash, LabelScan& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode_label_cache(bytes, hash, out);
}

}  // namespace

namespace {

// Writes the cache next to the labels; a folder we may not write only warns.
void save_cache(const LabelScan& scan, const std::string& cache_path) {
  const std::string dir = std::filesystem::path(cache_path).parent_path().string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    // No labels folder at all: the scan's own message (no labels found) says what is wrong.
  } else if (!folder_writable(dir)) {
    log_warn("label cache not saved: " + dir +
             " is not writable; labels will be re-checked next time (--cache-dir or "
             "YOLO_CACHE_DIR names a folder for caches)");
  } else {
    try {
      write_file_atomic(cache_path, encode_label_cache(scan));
      log_info("New label cache created: " + cache_path);
    } catch (const std::exception& e) {
      log_warn("label cache not saved (" + std::string(e.what()) +
               "); labels will be re-checked next time");
    }
  }
}

// Every rank checks its contiguous share of `images`; rank 0 joins the shares in rank order (the
// scan one process makes), writes the cache and hands the result to the others.
LabelScan scan_shared(const std::vector<std::string>& images, const std::string& cache_path, int nc,
                      uint64_t hash, const RankExchange& ranks, int threads) {
  const RankShare share = rank_share(images.size(), ranks.rank(), ranks.size());
  const std::vector<std::string> mine(images.begin() + share.first, images.begin() + share.last);
  LabelScan part = scan_labels(mine, nc, threads);
  part.hash = hash;
  const std::vector<std::string> parts = ranks.gather_to_rank0(
      "its share of the label check for " + cache_path, encode_label_cache(part));
  std::string merged;
  LabelScan scan;
  if (ranks.rank() == 0) {
    scan.hash = hash;
    for (size_t r = 0; r < parts.size(); ++r) {
      if (!decode_label_cache(parts[r], hash, part)) {
        throw std::runtime_error("rank " + std::to_string(r) + "'s label check for " + cache_path +
                                 " arrived damaged");
      }
      for (auto& rec : part.records) scan.records.push_back(std::move(rec));
      for (auto& m : part.messages) scan.messages.push_back(std::move(m));
      scan.found += part.found, scan.missing += part.missing;
      scan.empty += part.empty, scan.corrupt += part.corrupt;
    }
    save_cache(scan, cache_path);
    merged = encode_label_cache(scan);
  }
  merged = ranks.broadcast_from_rank0("the joined label check for " + cache_path, merged);
  if (ranks.rank() != 0 && !decode_label_cache(merged, hash, scan)) {
    throw std::runtime_error("rank 0's label check for " + cache_path + " arrived damaged");
  }
  scan.from_cache = false;
  return scan;
}

}  // namespace

LabelScan load_labels(const std::vector<std::string>& images, const std::string& cache_path, int nc,
                      const RankExchange* ranks, int threads) {
  const bool rank0 = !ranks || ranks->rank() == 0;
  const bool shared = ranks && ranks->size() > 1;
  uint64_t hash = label_files_hash(images, nc);
  LabelScan scan;
  bool have = rank0 && try_read_cache(cache_path, hash, scan);
  if (shared) {
    // Rank 0's hash decides: the ranks use rank 0's files' cache (the same dataset, maybe on
    // another machine's copy with other times).
    const std::string verdict = ranks->broadcast_from_rank0(
        "whether " + cache_path + " is fresh", (have ? "1 " : "0 ") + std::to_string(hash));
    hash = std::stoull(verdict.substr(2));
    if (verdict[0] == '0') {
      scan = scan_shared(images, cache_path, nc, hash, *ranks, threads);
      have = true;
    } else if (!rank0) {
      // A machine of its own without the file (no shared folder): this rank checks alone.
      have = try_read_cache(cache_path, hash, scan);
    }
  }
  if (!have) {
    scan = scan_labels(images, nc, threads);
    if (rank0) save_cache(scan, cache_path);
  }
  if (rank0) report(scan, cache_path, shared && !scan.from_cache ? ranks->size() : 1);
  if (scan.records.empty()) {
    throw std::runtime_error(cache_path + ": no usable images among " +
                             std::to_string(images.size()) + " (" + std::to_string(scan.corrupt) +
                             " corrupt); fix or replace the files named in the warnings above");
  }
  return scan;
}

}  // namespace yolo

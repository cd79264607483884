#include "utils/core/archive.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "utils/core/format.h"
#include "utils/core/log.h"

#ifdef YOLO_WITH_LIBARCHIVE
#include <archive.h>
#include <archive_entry.h>
#endif

namespace fs = std::filesystem;

namespace yolo {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool is_archive_url(const std::string& url) {
  const bool scheme =
      url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0 || url.rfind("file://", 0) == 0;
  if (!scheme) return false;
  for (const char* ext : {".zip", ".tar", ".tar.gz", ".tgz"}) {
    if (ends_with(url, ext)) return true;
  }
  return false;
}

#ifndef YOLO_WITH_LIBARCHIVE

bool unpack_supported() { return false; }

int64_t unpack_archive(const std::string& archive, const std::string& dest, const UnpackLimits&,
                       std::vector<std::string>*) {
  throw std::runtime_error("cannot unpack " + archive +
                           ": this build has no libarchive (install "
                           "libarchive-dev and rebuild); unpack it into " +
                           dest + " yourself");
}

#else

bool unpack_supported() { return true; }

namespace {

// An entry's name as a path inside the destination, or "" when it would leave it.
fs::path safe_entry_path(const std::string& name) {
  if (name.empty() || name[0] == '/' || name.find('\\') != std::string::npos) return {};
  fs::path out;
  for (const fs::path& part : fs::path(name)) {
    const std::string p = part.string();
    if (p == "..") return {};
    if (p.empty() || p == ".") continue;
    out /= part;
  }
  return out;
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::file_size(a, ec) != fs::file_size(b, ec) || ec) return false;
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  std::vector<char> bx(1 << 16), by(1 << 16);
  while (x && y) {
    x.read(bx.data(), bx.size());
    y.read(by.data(), by.size());
    if (x.gcount() != y.gcount() || !std::equal(bx.begin(), bx.begin() + x.gcount(), by.begin())) {
      return false;
    }
  }
  return x.eof() && y.eof();
}

// Moves the tree `from` into `to`, merging folders. Nothing already there is replaced: a file,
// folder or link at a place an entry would go stays, and its path goes to `kept` (unless it is a
// file with the entry's own bytes).
void merge_into(const fs::path& from, const fs::path& to, std::vector<std::string>& kept) {
  fs::create_directories(to);
  for (const fs::directory_entry& e : fs::directory_iterator(from)) {
    const fs::path target = to / e.path().filename();
    std::error_code ec;
    if (e.is_directory() && fs::is_directory(target, ec)) {
      merge_into(e.path(), target, kept);
    } else if (!fs::exists(fs::symlink_status(target, ec))) {
      fs::rename(e.path(), target);
    } else if (!(e.is_regular_file() && fs::is_regular_file(target, ec) &&
                 same_bytes(e.path(), target))) {
      kept.push_back(target.string());
    }
  }
}

// libarchive's message for its last error (it may have none).
std::string error_of(archive* a) {
  const char* e = archive_error_string(a);
  return e ? e : "unreadable";
}

struct ArchiveReader {
  archive* a = archive_read_new();
  ~ArchiveReader() { archive_read_free(a); }
};

// Reads every entry of `archive` into `tmp`; returns the number of files.
int64_t read_entries(const std::string& archive, const fs::path& tmp, int64_t max_bytes,
                     int64_t max_entries) {
  ArchiveReader r;
  archive_read_support_format_zip(r.a);
  archive_read_support_format_tar(r.a);
  archive_read_support_filter_gzip(r.a);
  const auto fail = [&](const std::string& why) {
    return std::runtime_error("cannot unpack " + archive + ": " + why);
  };
  if (archive_read_open_filename(r.a, archive.c_str(), 1 << 16) != ARCHIVE_OK) {
    throw fail(error_of(r.a) + " (not a zip or tar archive?)");
  }
  int64_t files = 0, entries = 0, written = 0;
  archive_entry* entry = nullptr;
  std::vector<char> buffer(1 << 16);
  for (;;) {
    const int rc = archive_read_next_header(r.a, &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) throw fail(error_of(r.a));
    const std::string name = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
    if (++entries > max_entries) {
      throw fail("more than " + std::to_string(max_entries) + " entries; refused");
    }
    const fs::path rel = safe_entry_path(name);
    if (rel.empty()) {
      if (name == "./" || name == ".") continue;
      throw fail("entry '" + name + "' would be written outside " + tmp.parent_path().string() +
                 "; refused");
    }
    const auto type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) {
      fs::create_directories(tmp / rel);
      continue;
    }
    if (type != AE_IFREG) {
      throw fail("entry '" + name + "' is a link or special file; refused");
    }
    fs::create_directories((tmp / rel).parent_path());
    std::ofstream out(tmp / rel, std::ios::binary | std::ios::trunc);
    if (!out) throw fail("cannot write " + (tmp / rel).string());
    for (;;) {
      const la_ssize_t n = archive_read_data(r.a, buffer.data(), buffer.size());
      if (n == 0) break;
      if (n < 0) throw fail("entry '" + name + "': " + error_of(r.a));
      written += n;
      if (written > max_bytes) {
        throw fail("it expands to more than " + std::to_string(max_bytes >> 20) +
                   " MB (a zip bomb?); refused. Unpack it yourself if you trust it");
      }
      out.write(buffer.data(), n);
      if (!out) throw fail("cannot write " + (tmp / rel).string() + " (disk full?)");
    }
    ++files;
  }
  return files;
}

}  // namespace

int64_t unpack_archive(const std::string& archive, const std::string& dest,
                       const UnpackLimits& limits, std::vector<std::string>* kept_out) {
  std::error_code ec;
  const int64_t size = static_cast<int64_t>(fs::file_size(archive, ec));
  if (ec) throw std::runtime_error("cannot unpack " + archive + ": " + ec.message());
  const int64_t max_bytes =
      limits.max_bytes > 0 ? limits.max_bytes : std::max<int64_t>(int64_t{2} << 30, 200 * size);
  fs::create_directories(dest, ec);
  if (ec) throw std::runtime_error("cannot create " + dest + ": " + ec.message());
  const fs::path tmp = fs::path(dest) / (".unpacking-" + std::to_string(getpid()));
  fs::remove_all(tmp, ec);
  int64_t files = 0;
  std::vector<std::string> kept;
  try {
    files = read_entries(archive, tmp, max_bytes, limits.max_entries);
    if (fs::exists(tmp)) merge_into(tmp, dest, kept);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::remove_all(tmp, ec);
  if (!kept.empty()) {
    std::string names;
    for (size_t i = 0; i < kept.size() && i < 5; ++i) names += (i ? ", " : "") + one_line(kept[i]);
    if (kept.size() > 5) names += " and " + std::to_string(kept.size() - 5) + " more";
    log_warn(one_line(archive) + ": " + std::to_string(kept.size()) +
             (kept.size() == 1 ? " entry was" : " entries were") +
             " not unpacked because something of that name is already there, which is kept: " +
             names + " (move it aside and unpack again for the archive's copy)");
  }
  if (kept_out) *kept_out = kept;
  return files;
}

#endif

}  // namespace yolo

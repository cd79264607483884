#include "utils/core/fs_atomic.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace yolo {
namespace {

// A process killed while writing (SIGKILL, power loss) leaves its temporary file behind; sweep
// those of the same target that nobody has modified for 10 minutes, so crash loops do not fill
// the disk with dead checkpoints. A live writer's file is fresh, so it is left alone.
void remove_stale_temporaries(const std::filesystem::path& dir, const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::minutes(10);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // mkstemp replaces the six X's of the template with six characters.
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    std::error_code e2;
    const auto t = fs::last_write_time(it->path(), e2);
    if (!e2 && t < cutoff && it->is_regular_file(e2)) fs::remove(it->path(), e2);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = "." + target.filename().string() + ".tmp";
  std::string tmpl = (dir / (prefix + "XXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0) {
    throw std::runtime_error(path + ": cannot create a temporary file in " + dir.string() + ": " +
                             std::strerror(errno));
  }
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw std::runtime_error(path + ": " + what + ": " + std::strerror(err) +
                             " (the previous file, if any, is unchanged)");
  };
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed");
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync failed");
  // mkstemp creates 0600; give the file the usual permissions.
  ::fchmod(fd, 0644);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw std::runtime_error(path + ": close failed: " + std::strerror(err));
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw std::runtime_error(path + ": rename failed: " + std::strerror(err));
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  remove_stale_temporaries(dir, prefix);
}

}  // namespace yolo

#include "utils/fs_atomic.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace yolo {

void write_file_atomic(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
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
}

}  // namespace yolo

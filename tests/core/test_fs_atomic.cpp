#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "utils/core/fs_atomic.h"

namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST(FsAtomic, WritesAndReplaces) {
  const fs::path d = fs::temp_directory_path() / ("yolo_atomic_" + std::to_string(::getpid()));
  fs::create_directories(d);
  const fs::path f = d / "a.bin";
  yolo::write_file_atomic(f.string(), "first");
  EXPECT_EQ(slurp(f), "first");
  yolo::write_file_atomic(f.string(), std::string(100000, 'x'));
  EXPECT_EQ(slurp(f).size(), 100000u);
  // No temporary files are left behind.
  int n = 0;
  for (const auto& e : fs::directory_iterator(d)) n += e.is_regular_file();
  EXPECT_EQ(n, 1);
  fs::remove_all(d);
}

TEST(FsAtomic, ReadOnlyFolderFailsAndKeepsTheOldFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores folder permissions";
  const fs::path d = fs::temp_directory_path() / ("yolo_atomic_ro_" + std::to_string(::getpid()));
  fs::create_directories(d);
  const fs::path f = d / "last.pt";
  yolo::write_file_atomic(f.string(), "old");
  ::chmod(d.c_str(), 0555);
  EXPECT_THROW(yolo::write_file_atomic(f.string(), "new"), std::runtime_error);
  ::chmod(d.c_str(), 0755);
  EXPECT_EQ(slurp(f), "old");
  fs::remove_all(d);
}

TEST(FsAtomic, MissingFolderNamesThePath) {
  try {
    yolo::write_file_atomic("/nonexistent_dir_for_test/x.pt", "x");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent_dir_for_test/x.pt"), std::string::npos);
  }
}

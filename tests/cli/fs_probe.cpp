// A program that uses std::filesystem as ours do, for ctest fs_binding. Built twice: linked as the
// project's programs are (fs_probe) and with LibTorch's libraries ahead of libstdc++ and without
// the project's guard (fs_probe_unguarded), the layout that crashed on a GPU machine.
// Usage: fs_probe [DIR]: with DIR, makes a small tree in it and removes it with remove_all.
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) return 0;
  const fs::path root = fs::path(argv[1]) / "probe_tree";
  fs::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "b" / "file.txt") << "x";
  const auto removed = fs::remove_all(root);
  std::printf("removed %ju entries\n", static_cast<std::uintmax_t>(removed));
  return removed == 4 && !fs::exists(root) ? 0 : 1;
}

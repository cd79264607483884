#pragma once
// Shared by the libFuzzer targets: a private temp folder for files the parsers read, and the
// contract every loader keeps (docs/ARCHITECTURE.md): failures are exceptions whose message names
// the file.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace yolo::fuzz {

inline const std::string& temp_dir() {
  static const std::string dir = [] {
    // libFuzzer exits without running destructors: scripts/fuzz.sh points TMPDIR at a folder it
    // clears itself.
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/yolo_fuzz_XXXXXX";
    if (!mkdtemp(tmpl.data())) std::abort();
    return tmpl;
  }();
  return dir;
}

inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// A message that does not name the file breaks the contract: report it as a finding.
inline void require_names(const std::exception& e, const std::string& path) {
  if (std::string(e.what()).find(path) == std::string::npos) {
    std::fprintf(stderr, "error message does not name %s: %s\n", path.c_str(), e.what());
    std::abort();
  }
}

// Runs one loader: it either accepts the input or refuses it naming the file.
template <typename Fn>
void accepted_or_named(const std::string& path, Fn&& load) {
  try {
    load();
  } catch (const std::exception& e) {
    require_names(e, path);
  }
}

}  // namespace yolo::fuzz

#pragma once
// Crash-safe file writes: data goes to a temporary file in the same folder, is flushed to disk,
// then renamed over the target, so readers see either the old or the new file, never a torn one.
#include <string>

namespace yolo {

// Throws std::runtime_error naming `path` and the OS error (e.g. disk full, read-only folder);
// on failure the previous file at `path` is left untouched. After a successful write, temporary
// files of the same target left by killed writers (untouched for 10 minutes) are removed.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace yolo

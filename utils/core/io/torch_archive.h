#pragma once
// Opening torch.save zip files safely: the whole file in memory, every read bounded by it, and
// LibTorch's reader errors turned into messages that name the file and say what to do.
#include <caffe2/serialize/inline_container.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace yolo {

// The bytes of `path`; throws naming the file when it cannot be opened or is not a zip (a
// torch.save zip starts with "PK\3\4"). `kind` ("checkpoint", "weights file") and `hint` go
// into the messages.
std::vector<char> read_torch_zip_bytes(const std::string& path, const std::string& kind,
                                       const std::string& hint);

// What is wrong with the zip in `bytes` as to memory, or "": a member whose header claims more
// than the file could reasonably inflate to (16 times its size plus 16 MiB, over all members) is
// refused before anything is inflated, since the reader allocates what the header claims. Each
// member then inflates into exactly that much, no more.
std::string zip_inflation_problem(const std::vector<char>& bytes);

// A stream reader over `bytes` (which must outlive it) that never reads past them.
std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_torch_zip(
    const std::vector<char>& bytes);

// `e`, raised while reading `path`'s archive or pickle, as an error naming the file and saying
// why (truncated, newer format, code in the pickle, ...).
[[noreturn]] void throw_archive_error(const std::string& path, const std::string& kind,
                                      const std::string& hint, const std::exception& e);

}  // namespace yolo

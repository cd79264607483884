#include "utils/core/io/torch_archive.h"

#include <caffe2/serialize/read_adapter_interface.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "utils/core/format.h"

namespace yolo {
namespace {

// LibTorch 1.13's MemoryReadAdapter (behind torch::pickle_load) copies whatever range miniz asks
// for, so a damaged zip makes it read past the buffer (ASan: heap-use-after-free on a truncated
// last.pt). This adapter clamps every read to the buffer; miniz sees the short read and reports
// a damaged archive.
class BoundedReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReadAdapter(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, bytes_.size() - pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::vector<char>& bytes_;
};

uint64_t le(const std::vector<char>& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// A member's uncompressed size from its zip64 extra field (id 1), which holds the 64-bit values
// of exactly those header fields that are 0xFFFFFFFF, uncompressed size first.
uint64_t zip64_size(const std::vector<char>& b, size_t extra, size_t extra_len, uint64_t size32) {
  if (size32 != 0xFFFFFFFFu) return size32;
  for (size_t at = extra; at + 4 <= extra + extra_len;) {
    const uint64_t id = le(b, at, 2), len = le(b, at + 2, 2);
    if (id == 1 && len >= 8 && at + 12 <= b.size()) return le(b, at + 4, 8);
    at += 4 + len;
  }
  return UINT64_MAX;  // claims zip64 without saying: as large as can be
}

}  // namespace

std::string zip_inflation_problem(const std::vector<char>& b) {
  // The end-of-central-directory record: 22 bytes, then a comment of up to 64 KiB.
  size_t eocd = std::string::npos;
  for (size_t back = 22; back <= std::min<size_t>(b.size(), 22 + 65535); ++back) {
    if (le(b, b.size() - back, 4) == 0x06054b50) {
      eocd = b.size() - back;
      break;
    }
  }
  if (eocd == std::string::npos) return "";  // not a zip's tail: the reader says it is damaged
  uint64_t entries = le(b, eocd + 10, 2), offset = le(b, eocd + 16, 4);
  if ((entries == 0xFFFF || offset == 0xFFFFFFFFu) && eocd >= 20 &&
      le(b, eocd - 20, 4) == 0x07064b50) {  // zip64: its locator, then its own record
    const uint64_t z = le(b, eocd - 20 + 8, 8);
    if (z + 56 > b.size() || le(b, z, 4) != 0x06064b50) return "";
    entries = le(b, z + 32, 8);
    offset = le(b, z + 48, 8);
  }
  // Within what the file can hold: torch.save stores its members uncompressed, and deflate
  // reaches at most about 1032:1, which no model needs.
  const uint64_t bound = 16 * static_cast<uint64_t>(b.size()) + (uint64_t(16) << 20);
  uint64_t total = 0;
  size_t at = offset;
  for (uint64_t i = 0; i < entries && at + 46 <= b.size() && le(b, at, 4) == 0x02014b50; ++i) {
    const size_t name_len = le(b, at + 28, 2), extra_len = le(b, at + 30, 2),
                 comment_len = le(b, at + 32, 2);
    if (at + 46 + name_len + extra_len > b.size()) break;
    const uint64_t size = zip64_size(b, at + 46 + name_len, extra_len, le(b, at + 24, 4));
    const std::string name(b.data() + at + 46, name_len);
    total = size > bound ? bound + 1 : total + size;
    if (total > bound) {
      return "refused: its zip member '" + one_line(name) + "' would inflate to " +
             (size == UINT64_MAX ? std::string("an unstated size")
                                 : std::to_string(size) + " bytes") +
             ", more than a " + std::to_string(b.size()) + "-byte file can hold (at most " +
             std::to_string(bound) +
             " bytes in all); the file is damaged or built to exhaust "
             "memory";
    }
    at += 46 + name_len + extra_len + comment_len;
  }
  return "";
}

std::vector<char> read_torch_zip_bytes(const std::string& path, const std::string& kind,
                                       const std::string& hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the " + kind + " (does it exist?)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 4 || bytes[0] != 'P' || bytes[1] != 'K' || bytes[2] != 3 || bytes[3] != 4) {
    throw std::runtime_error(
        path + ": not a " + kind +
        ": not a zip-format torch.save file (empty, legacy or foreign format)" + hint);
  }
  // Before any member is read: the reader allocates what a member's header claims.
  if (const std::string why = zip_inflation_problem(bytes); !why.empty()) {
    throw std::runtime_error(path + ": " + why);
  }
  return bytes;
}

std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_torch_zip(
    const std::vector<char>& bytes) {
  return std::make_unique<caffe2::serialize::PyTorchStreamReader>(
      std::make_shared<BoundedReadAdapter>(bytes));
}

void throw_archive_error(const std::string& path, const std::string& kind, const std::string& hint,
                         const std::exception& e) {
  std::string what = e.what();
  what = what.substr(0, what.find('\n'));
  // Caffe2's "[enforce fail at inline_container.cc:165] . " prefix says nothing to a user.
  if (what.rfind("[enforce fail at ", 0) == 0 && what.find("] ") != std::string::npos) {
    what = what.substr(what.find("] ") + 2);
    if (what.rfind(". ", 0) == 0) what = what.substr(2);
  }
  const std::string no_code =
      "; checkpoints and weights may hold only tensors and plain values, and loading never "
      "executes code";
  const auto global = what.find("found unknown ");
  if (global != std::string::npos) {
    // "Unpickler found unknown type os.system" / "... unknown torch global, 'torch.x'"
    const auto name = what.find_last_of(" '", what.size() - 2);
    std::string ref = what.substr(name + 1);
    if (!ref.empty() && ref.back() == '\'') ref.pop_back();
    throw std::runtime_error(path + ": refused: the pickle calls Python code (" + ref + ")" +
                             no_code);
  }
  if (what.find("Unknown opcode") != std::string::npos) {
    throw std::runtime_error(path + ": refused: the pickle uses an opcode LibTorch does not " +
                             "load (" + what + ")" + no_code);
  }
  if (what.find("Pickle protocol") != std::string::npos) {
    throw std::runtime_error(path + ": refused: not pickle protocol 2, the one torch.save " +
                             "writes (" + what + "); save it with torch.save" + no_code);
  }
  if (what.find("maximum supported version") != std::string::npos) {
    throw std::runtime_error(path + ": written in a newer torch.save format than this " +
                             "LibTorch reads (" + what + "); re-save it with an older torch");
  }
  throw std::runtime_error(path + ": cannot read the " + kind + " (" + what +
                           "); the file may be truncated or damaged" + hint);
}

}  // namespace yolo

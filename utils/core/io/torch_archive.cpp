#include "utils/core/io/torch_archive.h"

#include <caffe2/serialize/read_adapter_interface.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

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

}  // namespace

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

#pragma once
// Hand-written pickles in torch.save zip archives, for checking that loading refuses code.
// Nothing here goes through a pickler: the opcodes are spelled out byte by byte.
#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace yolo::test {

inline std::string pickle_binunicode(const std::string& s) {
  std::string out = "X";
  const uint32_t n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + s;
}

// KIND: os-system (GLOBAL os.system + REDUCE, ARG = shell command), eval (builtins.eval + REDUCE),
// inst (INST os.system), stack-global (STACK_GLOBAL os.system + REDUCE), protocol4 (the same
// under a protocol 4 header, as Python's pickle writes by default), newer (a valid empty dict),
// empty-dict (the same).
inline std::string hostile_pickle(const std::string& kind, const std::string& arg) {
  const std::string proto = "\x80\x02";
  const std::string call = "(" + pickle_binunicode(arg) + "tR.";
  if (kind == "os-system") return proto + "cos\nsystem\n" + call;
  if (kind == "eval") return proto + "cbuiltins\neval\n" + call;
  if (kind == "inst") return proto + "(" + pickle_binunicode(arg) + "ios\nsystem\n.";
  const std::string stack_global = pickle_binunicode("os") + pickle_binunicode("system") + "\x93";
  if (kind == "stack-global") return proto + stack_global + call;
  if (kind == "protocol4") return "\x80\x04" + stack_global + call;
  if (kind == "newer" || kind == "empty-dict") return proto + "}.";
  throw std::runtime_error("unknown pickle kind '" + kind + "'");
}

// Writes a torch.save-style zip at `out` whose data.pkl is hostile_pickle(kind, arg); "newer"
// also claims archive format version 99 (LibTorch 1.13 reads up to 10).
inline void write_pickle_archive(const std::string& out, const std::string& kind,
                                 const std::string& arg) {
  caffe2::serialize::PyTorchStreamWriter w(out);
  if (kind == "newer") w.setMinVersion(99);
  const std::string pkl = hostile_pickle(kind, arg);
  w.writeRecord("data.pkl", pkl.data(), pkl.size());
  w.writeEndOfFile();
}

}  // namespace yolo::test

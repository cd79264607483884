#pragma once
// Little binary records: plain values and length-prefixed strings appended to a byte string, and
// read back with every read checked against the bytes left (a damaged or hostile record fails
// to decode instead of reading past its end). Host byte order: for files and messages between
// processes of one build.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace yolo {

class ByteWriter {
 public:
  template <typename T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    buf_ += s;
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    pod<uint64_t>(v.size());
    buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string& bytes() { return buf_; }

 private:
  std::string buf_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string& b) : b_(b) {}
  template <typename T>
  bool pod(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (pos_ + sizeof v > b_.size()) return false;
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool str(std::string& s) {
    uint64_t n = 0;
    if (!pod(n) || n > b_.size() - pos_) return false;
    s.assign(b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool vec(std::vector<T>& v) {
    uint64_t n = 0;
    if (!pod(n) || n > (b_.size() - pos_) / sizeof(T)) return false;
    v.resize(n);
    std::memcpy(v.data(), b_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  bool at_end() const { return pos_ == b_.size(); }

 private:
  const std::string& b_;
  size_t pos_ = 0;
};

}  // namespace yolo

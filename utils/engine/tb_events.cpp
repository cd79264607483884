#include "utils/engine/tb_events.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace yolo {

namespace fs = std::filesystem;

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol buffer wire format, only what Event, Summary and Summary.Value need.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <typename T>
void put_fixed(std::string& out, T v) {  // little-endian, as the wire format wants
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_varint(e, (1 << 3) | 1);
  put_fixed(e, wall_time);
  put_varint(e, (2 << 3) | 0);
  put_varint(e, static_cast<uint64_t>(step));
  return e;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Reads protocol buffer fields from [p, end); throws on malformed input.
class WireReader {
 public:
  WireReader(const char* p, const char* end) : p_(p), end_(end) {}
  bool done() const { return p_ >= end_; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint longer than 10 bytes");
  }
  template <typename T>
  T fixed() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string bytes() {
    const uint64_t n = varint();
    need(n);
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case 0:
        varint();
        break;
      case 1:
        fixed<uint64_t>();
        break;
      case 2:
        bytes();
        break;
      case 5:
        fixed<uint32_t>();
        break;
      default:
        throw std::runtime_error("unsupported wire type " + std::to_string(wire_type));
    }
  }

 private:
  void need(uint64_t n) const {
    if (static_cast<uint64_t>(end_ - p_) < n) throw std::runtime_error("field runs past its end");
  }
  const char* p_;
  const char* end_;
};

void parse_value(const std::string& msg, EventRecord& rec) {
  WireReader r(msg.data(), msg.data() + msg.size());
  std::string tag;
  float value = 0;
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == ((1 << 3) | 2)) {
      tag = r.bytes();
    } else if (key == ((2 << 3) | 5)) {
      value = r.fixed<float>();
    } else {
      r.skip(static_cast<int>(key & 7));
    }
  }
  rec.scalars.emplace_back(tag, value);
}

EventRecord parse_event(const std::string& msg) {
  EventRecord rec;
  WireReader r(msg.data(), msg.data() + msg.size());
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == ((1 << 3) | 1)) {
      rec.wall_time = r.fixed<double>();
    } else if (key == ((2 << 3) | 0)) {
      rec.step = static_cast<int64_t>(r.varint());
    } else if (key == ((3 << 3) | 2)) {
      rec.file_version = r.bytes();
    } else if (key == ((5 << 3) | 2)) {
      const std::string summary = r.bytes();
      WireReader s(summary.data(), summary.data() + summary.size());
      while (!s.done()) {
        const uint64_t k = s.varint();
        if (k == ((1 << 3) | 2)) {
          parse_value(s.bytes(), rec);
        } else {
          s.skip(static_cast<int>(k & 7));
        }
      }
    } else {
      r.skip(static_cast<int>(key & 7));
    }
  }
  return rec;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

EventWriter::EventWriter(const std::string& log_dir) {
  static std::atomic<int> counter{0};
  std::error_code ec;
  fs::create_directories(log_dir, ec);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  const auto secs = static_cast<int64_t>(now_seconds());
  char name[400];
  std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.%s.%d.%d",
                static_cast<long long>(secs), host, static_cast<int>(getpid()), counter++);
  path_ = (fs::path(log_dir) / name).string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) {
    throw std::runtime_error(path_ + ": cannot create the TensorBoard event file (" +
                             std::strerror(errno) + "); check that the run folder is writable");
  }
  std::string e = event_header(now_seconds(), 0);
  put_bytes(e, 3, "brain.Event:2");
  write_record(e);
}

void EventWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  std::string v;
  put_bytes(v, 1, tag);
  put_varint(v, (2 << 3) | 5);
  put_fixed(v, value);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event_header(now_seconds(), step);
  put_bytes(e, 5, summary);
  write_record(e);
}

void EventWriter::write_record(const std::string& payload) {
  std::string rec;
  const uint64_t len = payload.size();
  put_fixed(rec, len);
  put_fixed(rec, masked_crc32c(&len, sizeof(len)));
  rec += payload;
  put_fixed(rec, masked_crc32c(payload.data(), payload.size()));
  out_.write(rec.data(), static_cast<std::streamsize>(rec.size()));
  out_.flush();
  if (!out_) throw std::runtime_error(path_ + ": writing a TensorBoard event failed (disk full?)");
}

std::vector<EventRecord> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the event file");
  std::vector<EventRecord> out;
  for (size_t i = 0;; ++i) {
    const std::string where = path + ": record " + std::to_string(i) + ": ";
    uint64_t len = 0;
    uint32_t len_crc = 0, data_crc = 0;
    if (!in.read(reinterpret_cast<char*>(&len), sizeof(len))) {
      if (in.gcount() == 0) break;
      throw std::runtime_error(where + "truncated length");
    }
    if (!in.read(reinterpret_cast<char*>(&len_crc), sizeof(len_crc)) ||
        len_crc != masked_crc32c(&len, sizeof(len))) {
      throw std::runtime_error(where + "bad length checksum");
    }
    std::string payload(len, '\0');
    if (!in.read(payload.data(), static_cast<std::streamsize>(len)) ||
        !in.read(reinterpret_cast<char*>(&data_crc), sizeof(data_crc))) {
      throw std::runtime_error(where + "truncated payload");
    }
    if (data_crc != masked_crc32c(payload.data(), payload.size())) {
      throw std::runtime_error(where + "bad payload checksum");
    }
    try {
      out.push_back(parse_event(payload));
    } catch (const std::exception& e) {
      throw std::runtime_error(where + e.what());
    }
  }
  return out;
}

}  // namespace yolo

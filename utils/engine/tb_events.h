#pragma once
// TensorBoard event files written without TensorFlow: records of Event protocol buffers in
// TFRecord framing (length, masked CRC-32C of the length, payload, masked CRC-32C of the
// payload). TensorBoard, tensorboardX and torch.utils.tensorboard all read this format.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace yolo {

// CRC-32C (Castagnoli), and TFRecord's masked form of it.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

// One event file in `log_dir` (made if missing), named as torch.utils.tensorboard names them
// (events.out.tfevents.<seconds>.<host>.<pid>.<n>) so a resumed run adds a file beside the old
// ones. Every record is flushed as written: a killed run keeps every scalar it logged.
class EventWriter {
 public:
  // Throws std::runtime_error naming the file when it cannot be created.
  explicit EventWriter(const std::string& log_dir);
  const std::string& path() const { return path_; }
  // A scalar as TensorBoard's "simple_value" (float32), at `step`, stamped with the current time.
  void add_scalar(const std::string& tag, float value, int64_t step);

 private:
  void write_record(const std::string& payload);
  std::string path_;
  std::ofstream out_;
};

// A record read back from an event file (for tests and tools).
struct EventRecord {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;  // tag, simple_value
};
// Throws std::runtime_error naming the file and record index on a bad checksum or truncation.
std::vector<EventRecord> read_event_file(const std::string& path);

}  // namespace yolo

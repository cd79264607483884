// TensorBoard event files: the records TensorBoard reads, checksummed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "utils/engine/tb_events.h"

namespace fs = std::filesystem;
using namespace yolo;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(TensorBoard, Crc32cMatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // RFC 3720's check value for CRC-32C
}

TEST(TensorBoard, ScalarsReadBackWithTheirStepsAndEveryRecordChecksummed) {
  const fs::path dir = temp_dir("tb_events");
  std::string path;
  {
    EventWriter w(dir.string());
    path = w.path();
    w.add_scalar("train/box_loss", 0.125f, 0);
    w.add_scalar("metrics/mAP_0.5:0.95", 0.5f, 1);
  }
  EXPECT_NE(fs::path(path).filename().string().find("events.out.tfevents."), std::string::npos);
  const auto recs = read_event_file(path);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].file_version, "brain.Event:2");
  ASSERT_EQ(recs[2].scalars.size(), 1u);
  EXPECT_EQ(recs[2].scalars[0].first, "metrics/mAP_0.5:0.95");
  EXPECT_EQ(recs[2].scalars[0].second, 0.5f);
  EXPECT_EQ(recs[2].step, 1);
  EXPECT_GT(recs[1].wall_time, 1.6e9);
  // A flipped byte in the last payload is caught by its checksum.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-6, std::ios::end);
    f.put('\x7f');
  }
  try {
    read_event_file(path);
    FAIL() << "a corrupted record was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("record 2: bad payload checksum"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

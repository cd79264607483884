// Label cache reuse, invalidation, read-only folders, rank-0 build with a barrier.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/file_lists.h"
#include "data/label_cache.h"
#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::make_split;
using yolo::test::TempDir;
using yolo::test::write_text;

TEST(LabelCache, EncodeDecodeRoundTrip) {
  LabelScan s;
  s.records.push_back({"a.png", 10, 20, {{1, 0.5f, 0.5f, 0.1f, 0.2f}}});
  s.records.push_back({"b.png", 30, 40, {}});
  s.found = 2, s.missing = 1, s.empty = 1, s.corrupt = 3;
  s.messages = {"warn"};
  s.hash = 42;
  const std::string bytes = encode_label_cache(s);
  LabelScan out;
  ASSERT_TRUE(decode_label_cache(bytes, 42, out));
  EXPECT_TRUE(out.from_cache);
  ASSERT_EQ(out.records.size(), 2u);
  EXPECT_EQ(out.records[0].image, "a.png");
  EXPECT_EQ(out.records[1].width, 40);
  EXPECT_FLOAT_EQ(out.records[0].labels[0].h, 0.2f);
  EXPECT_EQ(out.corrupt, 3);
  EXPECT_EQ(out.messages, s.messages);
  EXPECT_FALSE(decode_label_cache(bytes, 43, out));                              // stale
  EXPECT_FALSE(decode_label_cache(bytes.substr(0, bytes.size() - 3), 42, out));  // torn
  EXPECT_FALSE(decode_label_cache("garbage", 42, out));
}

TEST(LabelCache, ReuseAndInvalidation) {
  TempDir d;
  make_split(d.path(), "train", 4, 64, 48);
  write_text(d / "labels/train/im3.txt", "0 0.5 0.5 0.2\n");  // corrupt
  const auto files = list_image_files({d / "images/train"});
  const std::string cache = label_cache_path({d / "images/train"}, files);
  auto a = load_labels(files, cache, 2);
  EXPECT_FALSE(a.from_cache);
  EXPECT_TRUE(fs::exists(cache));
  EXPECT_EQ(a.records.size(), 3u);
  EXPECT_EQ(a.corrupt, 1);
  EXPECT_EQ(a.found, 3);
  auto b = load_labels(files, cache, 2);
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(b.records.size(), 3u);
  EXPECT_EQ(b.corrupt, 1);

  // Fixing a label file (size changes) invalidates; so does another nc.
  write_text(d / "labels/train/im3.txt", "1 0.5 0.5 0.2 0.25\n");
  auto c = load_labels(files, cache, 2);
  EXPECT_FALSE(c.from_cache);
  EXPECT_EQ(c.records.size(), 4u);
  EXPECT_TRUE(load_labels(files, cache, 2).from_cache);
  EXPECT_FALSE(load_labels(files, cache, 3).from_cache);
  // Removing a label file too.
  fs::remove(d / "labels/train/im0.txt");
  auto e = load_labels(files, cache, 3);
  EXPECT_FALSE(e.from_cache);
  EXPECT_EQ(e.missing, 1);
}

TEST(LabelCache, ReadOnlyFolderOnlyWarns) {
  TempDir d;
  make_split(d.path(), "val", 2, 32, 32);
  const auto files = list_image_files({d / "images/val"});
  fs::permissions(d / "labels", fs::perms::owner_write, fs::perm_options::remove);
  const auto s = load_labels(files, d / "labels/val.cache", 2);
  fs::permissions(d / "labels", fs::perms::owner_write, fs::perm_options::add);
  EXPECT_EQ(s.records.size(), 2u);
  EXPECT_FALSE(fs::exists(d / "labels/val.cache"));
}

TEST(LabelCache, UnwritableCachePathOnlyWarns) {
  TempDir d;
  make_split(d.path(), "val", 2, 32, 32);
  const auto files = list_image_files({d / "images/val"});
  const auto s = load_labels(files, d / "no/such/dir/val.cache", 2);
  EXPECT_EQ(s.records.size(), 2u);
}

TEST(LabelCache, NoUsableImageIsAnError) {
  TempDir d;
  write_text(d / "images/v/a.png", "junk");
  const auto files = list_image_files({d / "images/v"});
  try {
    load_labels(files, d / "labels/v.cache", 1);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable images"), std::string::npos) << e.what();
  }
}

TEST(LabelCache, RankZeroBuildsOthersRead) {
  TempDir d;
  make_split(d.path(), "train", 3, 32, 32);
  const auto files = list_image_files({d / "images/train"});
  const std::string cache = d / "labels/train.cache";
  int calls = 0;
  // Rank 0 writes before the barrier.
  auto r0 = load_labels(
      files, cache, 2,
      [&] {
        ++calls;
        EXPECT_TRUE(fs::exists(cache));
      },
      true);
  EXPECT_EQ(calls, 1);
  // Another rank does not build before the barrier and reads after it.
  auto r1 = load_labels(
      files, cache, 2, [&] { ++calls; }, false);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(r1.from_cache);
  EXPECT_EQ(r1.records.size(), r0.records.size());
  // Without a cache a non-zero rank still works (scans itself).
  fs::remove(cache);
  auto r2 = load_labels(files, cache, 2, {}, false);
  EXPECT_EQ(r2.records.size(), 3u);
  EXPECT_FALSE(fs::exists(cache));
}

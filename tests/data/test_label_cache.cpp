// Label cache reuse, invalidation, read-only folders, the check shared by ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/file_lists.h"
#include "data/label_cache.h"
#include "test_helpers.h"
#include "thread_ranks.h"
#include "utils/core/errors.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::Board;
using yolo::test::make_split;
using yolo::test::TempDir;
using yolo::test::ThreadRanks;
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

namespace {

// load_labels on `world` ranks at once (threads); the scans in rank order.
std::vector<LabelScan> load_on_ranks(const std::vector<std::string>& files,
                                     const std::string& cache, int world) {
  Board board;
  std::vector<LabelScan> scans(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      const ThreadRanks ranks(board, r, world);
      scans[r] = load_labels(files, cache, 2, &ranks, 1);
    });
  }
  for (auto& t : threads) t.join();
  return scans;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(LabelCache, RanksShareTheCheckAndWriteTheCacheOneProcessWrites) {
  TempDir d;
  make_split(d.path(), "train", 7, 32, 32);
  write_text(d / "labels/train/im1.txt", "0 0.5 0.5 0.2\n");  // corrupt
  write_text(d / "images/train/im5.png", "junk");             // corrupt
  fs::remove(d / "labels/train/im6.txt");                     // missing
  const auto files = list_image_files({d / "images/train"});
  const std::string cache = d / "labels/train.cache";
  const LabelScan one = load_labels(files, cache, 2, nullptr, 1);
  const std::string one_bytes = read_bytes(cache);
  ASSERT_EQ(one.corrupt, 2);
  for (int world : {2, 3, 8}) {  // 8 ranks: some check no image at all
    fs::remove(cache);
    const std::vector<LabelScan> scans = load_on_ranks(files, cache, world);
    EXPECT_EQ(read_bytes(cache), one_bytes) << world << " ranks";
    for (const LabelScan& s : scans) {
      EXPECT_FALSE(s.from_cache);
      EXPECT_EQ(s.messages, one.messages);
      EXPECT_EQ(encode_label_cache(s), encode_label_cache(one)) << world << " ranks";
    }
  }
  // A fresh cache: every rank reads it, none checks.
  const std::vector<LabelScan> again = load_on_ranks(files, cache, 2);
  EXPECT_TRUE(again[0].from_cache && again[1].from_cache);
  EXPECT_EQ(again[1].records.size(), one.records.size());
}

TEST(LabelCache, ARankWithoutRankZerosCacheFileChecksAlone) {
  TempDir d;
  make_split(d.path(), "train", 3, 32, 32);
  const auto files = list_image_files({d / "images/train"});
  const std::string cache = d / "labels/train.cache";
  load_labels(files, cache, 2);
  // Rank 0 says fresh; rank 1 (another machine: no such file there) checks every image itself.
  Board board;
  board.put("0", "1 " + std::to_string(label_files_hash(files, 2)));
  const ThreadRanks rank1(board, 1, 2);
  const LabelScan s = load_labels(files, d / "labels/elsewhere.cache", 2, &rank1, 1);
  EXPECT_EQ(s.records.size(), 3u);
  EXPECT_FALSE(fs::exists(d / "labels/elsewhere.cache"));  // only rank 0 writes
}

// A read-only dataset: --cache-dir (or YOLO_CACHE_DIR) keeps its label cache elsewhere, one
// file per labels folder, reused by the next run.
TEST(LabelCache, ACacheFolderServesReadOnlyDatasets) {
  TempDir d, caches;
  make_split(d.path(), "val", 3, 32, 32);
  const auto files = list_image_files({d / "images/val"});
  const std::string beside = label_cache_path({d / "images/val"}, files);
  const std::string moved = cache_file_in(beside, caches.path());
  EXPECT_EQ(fs::path(moved).parent_path(), fs::path(caches.path()));
  EXPECT_NE(moved, cache_file_in(d / "other/labels/val.cache", caches.path()));  // no clash
  fs::permissions(d / "labels", fs::perms::owner_write, fs::perm_options::remove);
  EXPECT_FALSE(load_labels(files, moved, 2).from_cache);
  EXPECT_TRUE(load_labels(files, moved, 2).from_cache);
  fs::permissions(d / "labels", fs::perms::owner_write, fs::perm_options::add);
  EXPECT_FALSE(fs::exists(beside));
  EXPECT_EQ(cache_file_in(beside, ""), beside);
}

TEST(LabelCache, TheCacheFolderComesFromTheFlagOrTheEnvironment) {
  TempDir d;
  unsetenv("YOLO_CACHE_DIR");
  EXPECT_EQ(resolve_cache_dir(""), "");
  setenv("YOLO_CACHE_DIR", (d / "env").c_str(), 1);
  EXPECT_EQ(resolve_cache_dir(""), d / "env");
  EXPECT_TRUE(fs::is_directory(d / "env"));
  EXPECT_EQ(resolve_cache_dir(d / "flag"), d / "flag");  // the flag wins
  write_text(d / "file", "x");
  setenv("YOLO_CACHE_DIR", (d / "file/sub").c_str(), 1);
  try {
    resolve_cache_dir("");
    FAIL() << "a cache folder inside a file";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("YOLO_CACHE_DIR=" + d / "file/sub"), std::string::npos)
        << e.what();
  }
  unsetenv("YOLO_CACHE_DIR");
}

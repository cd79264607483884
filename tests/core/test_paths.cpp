#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "utils/core/errors.h"
#include "utils/core/paths.h"
#include "utils/core/yaml_io.h"

namespace fs = std::filesystem;
using yolo::ConfigKind;
using yolo::resolve_config;

namespace {
fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("yolo_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
}  // namespace

TEST(Paths, BareNamesResolveInConfigFolders) {
  const fs::path root = yolo::project_root();
  EXPECT_EQ(fs::path(resolve_config("yolov5s.yaml", ConfigKind::kModel, "--cfg")),
            root / "configs/models/yolov5s.yaml");
  EXPECT_EQ(fs::path(resolve_config("yolov5n", ConfigKind::kModel, "--cfg")),
            root / "configs/models/yolov5n.yaml");
  EXPECT_EQ(fs::path(resolve_config("coco128.yaml", ConfigKind::kData, "--data")),
            root / "configs/data/coco128.yaml");
  EXPECT_EQ(fs::path(resolve_config("hyp.scratch-low.yaml", ConfigKind::kHyp, "--hyp")),
            root / "hyp/hyp.scratch-low.yaml");
  EXPECT_EQ(resolve_config("", ConfigKind::kModel, "--cfg"), "");
}

TEST(Paths, ExistingPathsWinOverBareNameLookup) {
  const fs::path d = fresh_dir("paths_exist");
  const fs::path f = d / "my.yaml";
  std::ofstream(f) << "nc: 1\n";
  EXPECT_EQ(resolve_config(f.string(), ConfigKind::kData, "--data"), f.string());
  fs::remove_all(d);
}

TEST(Paths, MissingFilesNameTheFlag) {
  try {
    resolve_config("nope.yaml", ConfigKind::kHyp, "--hyp");
    FAIL();
  } catch (const yolo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--hyp"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("nope.yaml"), std::string::npos);
  }
  // A path with a folder part is not looked up in configs/.
  EXPECT_THROW(resolve_config("some/dir/yolov5s.yaml", ConfigKind::kModel, "--cfg"),
               yolo::UsageError);
}

TEST(Paths, RunDirsIncrement) {
  const fs::path d = fresh_dir("paths_inc");
  const std::string base = (d / "train" / "exp").string();
  EXPECT_EQ(yolo::increment_path(base, false, true), base);
  EXPECT_EQ(yolo::increment_path(base, false, true), base + "2");
  EXPECT_EQ(yolo::increment_path(base, false, true), base + "3");
  EXPECT_TRUE(fs::is_directory(base + "3"));
  // Without mkdir: the next free name, nothing created.
  EXPECT_EQ(yolo::increment_path(base, false, false), base + "4");
  EXPECT_FALSE(fs::exists(base + "4"));
  // --exist-ok reuses the folder.
  EXPECT_EQ(yolo::increment_path(base, true, true), base);
  fs::remove_all(d);
}

TEST(Paths, ConcurrentRunsNeverShareARunDir) {
  const fs::path d = fresh_dir("paths_race");
  const std::string base = (d / "exp").string();
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { got[i] = yolo::increment_path(base, false, true); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), 8u);
  fs::remove_all(d);
}

// A key given twice in a YAML mapping: the last value wins (PyYAML's rule, which YOLOv5 follows
// for data and hyp files alike), nested mappings too, and values keep their line numbers.
TEST(YamlFiles, RepeatedKeysKeepTheLastValue) {
  const fs::path d = fresh_dir("yaml_dup");
  std::ofstream(d / "a.yaml") << "lr0: 0.01\nnames:\n  0: cat\n  0: dog\nlrf: 0.1\nlr0: 0.02\n";
  const YAML::Node n = yolo::load_yaml_file((d / "a.yaml").string());
  EXPECT_EQ(n["lr0"].as<double>(), 0.02);
  EXPECT_EQ(n["lrf"].as<double>(), 0.1);
  EXPECT_EQ(n["names"]["0"].as<std::string>(), "dog");
  EXPECT_EQ(n["names"].size(), 1u);
  EXPECT_EQ(n["lr0"].Mark().line, 5);  // 0-based: the last one's line
  std::size_t keys = 0;
  for (const auto& kv : n) keys += kv.first.IsScalar();
  EXPECT_EQ(keys, 3u);
  fs::remove_all(d);
}

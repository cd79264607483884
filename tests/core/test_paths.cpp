#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "utils/core/errors.h"
#include "utils/core/paths.h"

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

// Dataset YAML forms and the path rules (YOLOv5 v7.0 check_dataset / img2label_paths).
#include <gtest/gtest.h>

#include <filesystem>

#include "data/dataset_config.h"
#include "data/file_lists.h"
#include "test_helpers.h"
#include "utils/core/paths.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::TempDir;
using yolo::test::write_text;

TEST(DatasetConfig, NamesListAndRelativePaths) {
  TempDir d;
  write_text(d / "cfg/data.yaml",
             "path: ../ds\ntrain: images/train\nval: [images/val, extra.txt]\nnames: [a, b, c]\n");
  const auto cfg = load_dataset_config(d / "cfg/data.yaml");
  EXPECT_EQ(cfg.root, fs::path(d / "ds").lexically_normal().string());
  ASSERT_EQ(cfg.train.size(), 1u);
  EXPECT_EQ(cfg.train[0], d / "ds/images/train");
  ASSERT_EQ(cfg.val.size(), 2u);
  EXPECT_EQ(cfg.val[1], d / "ds/extra.txt");
  EXPECT_TRUE(cfg.test.empty());
  EXPECT_EQ(cfg.nc, 3);
  EXPECT_EQ(cfg.names[2], "c");
  EXPECT_EQ(&cfg.split("val"), &cfg.val);
  EXPECT_THROW(cfg.split("bogus"), std::runtime_error);
}

TEST(DatasetConfig, NamesMapAndNc) {
  TempDir d;
  write_text(d / "a.yaml", "path: .\ntrain: t\nval: v\nnc: 2\nnames: {1: dog, 0: cat}\n");
  const auto cfg = load_dataset_config(d / "a.yaml");
  EXPECT_EQ(cfg.names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(cfg.nc, 2);
}

TEST(DatasetConfig, ErrorsNameFileAndKey) {
  TempDir d;
  write_text(d / "nc.yaml", "train: t\nval: v\nnc: 3\nnames: [a, b]\n");
  try {
    load_dataset_config(d / "nc.yaml");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nc.yaml:3"), std::string::npos) << e.what();
  }
  write_text(d / "noval.yaml", "train: t\nnames: [a]\n");
  try {
    load_dataset_config(d / "noval.yaml");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'val'"), std::string::npos) << e.what();
  }
  write_text(d / "gap.yaml", "train: t\nval: v\nnames: {0: a, 2: c}\n");
  EXPECT_THROW(load_dataset_config(d / "gap.yaml"), std::runtime_error);
  write_text(d / "gen.yaml", "train: t\nval: v\nnames: [a]\ngenerate: spheres\n");
  EXPECT_THROW(load_dataset_config(d / "gen.yaml"), std::runtime_error);
  EXPECT_THROW(load_dataset_config(d / "missing.yaml"), std::runtime_error);
}

TEST(DatasetConfig, NcOnlyGivesDefaultNames) {
  TempDir d;
  write_text(d / "a.yaml", "train: t\nval: v\nnc: 2\n");
  const auto cfg = load_dataset_config(d / "a.yaml");
  EXPECT_EQ(cfg.names, (std::vector<std::string>{"class0", "class1"}));
}

TEST(DatasetConfig, MissingDataWithoutDownloadSaysWhatToDo) {
  TempDir d;
  write_text(d / "a.yaml", "path: ds\ntrain: images/t\nval: images/v\nnames: [a]\n");
  const auto cfg = load_dataset_config(d / "a.yaml");
  try {
    ensure_dataset(cfg);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("images/v"), std::string::npos) << e.what();
  }
}

TEST(DatasetConfig, ShapesYamlResolvesUnderRuns) {
  const auto cfg = load_dataset_config(project_root() + "/configs/data/shapes.yaml");
  EXPECT_EQ(cfg.generate, "shapes");
  EXPECT_EQ(cfg.nc, 3);
  EXPECT_EQ(cfg.root,
            fs::path(project_root() + "/runs/datasets/shapes").lexically_normal().string());
}

TEST(FileLists, LabelPathRule) {
  EXPECT_EQ(image_to_label_path("/d/images/train/a.jpg"), "/d/labels/train/a.txt");
  EXPECT_EQ(image_to_label_path("/images/x/images/b.c.png"), "/images/x/labels/b.c.txt");
  EXPECT_EQ(image_to_label_path("/d/pics/a.JPG"), "/d/pics/a.txt");
  EXPECT_TRUE(is_image_file("x.JPEG"));
  EXPECT_FALSE(is_image_file("x.txt"));
  EXPECT_FALSE(is_image_file("noext"));
}

TEST(FileLists, FoldersAndTxtLists) {
  TempDir d;
  write_text(d / "images/train/sub/b.jpg", "x");
  write_text(d / "images/train/a.png", "x");
  write_text(d / "images/train/notes.txt", "x");
  write_text(d / "list.txt", "./images/train/a.png\n\n  ./images/train/sub/b.jpg  \n");
  const auto from_dir = list_image_files({d / "images/train"});
  ASSERT_EQ(from_dir.size(), 2u);
  EXPECT_EQ(from_dir[0], d / "images/train/a.png");
  const auto from_list = list_image_files({d / "list.txt"});
  EXPECT_EQ(from_list, from_dir);
  EXPECT_EQ(label_cache_path({d / "images/train"}, from_dir), d / "labels/train.cache");
  EXPECT_EQ(label_cache_path({d / "list.txt"}, from_list), d / "list.cache");
  EXPECT_THROW(list_image_files({d / "nope"}), std::runtime_error);
  write_text(d / "empty/readme.md", "x");
  EXPECT_THROW(list_image_files({d / "empty"}), std::runtime_error);
}

TEST(DatasetConfig, PathFallsBackToProjectRoot) {
  TempDir d;
  fs::create_directories(d / "proj/datasets/x");
  write_text(d / "proj/configs/data/x.yaml", "path: datasets/x\ntrain: t\nval: v\nnames: [a]\n");
  const char* old = std::getenv("YOLO_ROOT");
  const std::string saved = old ? old : "";
  setenv("YOLO_ROOT", (d / "proj").c_str(), 1);
  const auto cfg = load_dataset_config(d / "proj/configs/data/x.yaml");
  if (old) {
    setenv("YOLO_ROOT", saved.c_str(), 1);
  } else {
    unsetenv("YOLO_ROOT");
  }
  EXPECT_EQ(cfg.root, d / "proj/datasets/x");
  EXPECT_EQ(cfg.val[0], d / "proj/datasets/x/v");
}

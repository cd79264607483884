// A dataset YAML's `download:`: archives fetched from a loopback server
// (tests/lib/asset_server.py) and unpacked where the YAML says; failures say what to fetch and
// where to put it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "data/dataset_config.h"
#include "data/download.h"
#include "test_helpers.h"
#include "tests/lib/asset_server.h"
#include "utils/core/archive.h"
#include "utils/core/fetch.h"
#include "utils/core/paths.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::AssetServer;
using yolo::test::make_split;
using yolo::test::TempDir;
using yolo::test::write_text;

namespace {

bool can_download() { return fetch_supported() && unpack_supported(); }

// Zips the folder `src` (its name the archive's top folder) into `zip`.
void zip_folder(const fs::path& src, const fs::path& zip) {
  fs::create_directories(zip.parent_path());
  const std::string cmd = "cd " + src.parent_path().string() + " && python3 -m zipfile -c " +
                          zip.string() + " " + src.filename().string() + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
}

}  // namespace

TEST(Download, FetchesAndUnpacksBesideThePath) {
  if (!can_download()) GTEST_SKIP() << "built without libcurl or libarchive";
  TempDir d;
  // A zip holding mini/images/{train,val} + labels, as YOLOv5's dataset zips hold coco128/.
  make_split(d / "src/mini", "train", 2, 32, 32);
  make_split(d / "src/mini", "val", 2, 32, 32);
  zip_folder(d / "src/mini", d / "www/mini.zip");
  AssetServer server(d / "www", d / "server");
  if (!server.ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  write_text(d / "cfg/mini.yaml",
             "path: ../datasets/mini\ntrain: images/train\n"
             "val: images/val\nnames: [a, b]\ndownload: " +
                 server.url("files", "mini.zip") + "\n");
  const auto cfg = load_dataset_config(d / "cfg/mini.yaml");
  ASSERT_EQ(cfg.downloads.size(), 1u);
  int barriers = 0;
  ensure_dataset(cfg, true, [&] { ++barriers; });
  EXPECT_EQ(barriers, 1);
  EXPECT_TRUE(fs::exists(d / "datasets/mini/images/val/im1.png"));
  EXPECT_TRUE(fs::exists(d / "datasets/mini/labels/train/im0.txt"));
  for (const auto& e : fs::directory_iterator(d / "datasets")) {
    EXPECT_EQ(e.path().filename(), "mini") << "leftover " << e.path();
  }
  // Present now: the second run fetches nothing.
  const size_t before = server.requests().size();
  ensure_dataset(load_dataset_config(d / "cfg/mini.yaml"));
  EXPECT_EQ(server.requests().size(), before);
}

TEST(Download, ListUnpacksEachArchiveIntoItsFolder) {
  if (!can_download()) GTEST_SKIP() << "built without libcurl or libarchive";
  TempDir d;
  // As coco.yaml: the labels archive holds the dataset's folder, the image archives one split.
  make_split(d / "src/set", "train", 2, 32, 32);
  make_split(d / "src/set", "val", 2, 32, 32);
  fs::rename(d / "src/set/images", d / "src/images");
  zip_folder(d / "src/set", d / "www/labels.zip");
  zip_folder(d / "src/images/train", d / "www/train.zip");
  zip_folder(d / "src/images/val", d / "www/val.zip");
  AssetServer server(d / "www", d / "server");
  if (!server.ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  write_text(d / "cfg/set.yaml",
             "path: ../datasets/set\ntrain: images/train\nval: images/val\nnames: [a, b]\n"
             "download:\n  - " +
                 server.url("files", "labels.zip") +
                 "\n  - {url: " + server.url("cut", "train.zip") +
                 ", dir: images}\n"
                 "  - {url: " +
                 server.url("files", "val.zip") + ", dir: images}\n");
  const auto cfg = load_dataset_config(d / "cfg/set.yaml");
  ASSERT_EQ(cfg.downloads.size(), 3u);
  EXPECT_EQ(fs::path(cfg.downloads[1].dir), fs::path(cfg.root) / "images");
  ensure_dataset(cfg);
  EXPECT_TRUE(fs::exists(d / "datasets/set/labels/val/im1.txt"));
  EXPECT_TRUE(fs::exists(d / "datasets/set/images/train/im0.png"));
  EXPECT_TRUE(fs::exists(d / "datasets/set/images/val/im1.png"));
  EXPECT_FALSE(fs::exists(d / "datasets/set/images/train.zip"));
}

TEST(Download, ArchiveEscapingTheFolderIsRefused) {
  if (!can_download()) GTEST_SKIP() << "built without libcurl or libarchive";
  TempDir d;
  fs::create_directories(d / "www");
  const std::string cmd = "python3 -c \"import zipfile; z=zipfile.ZipFile('" +
                          std::string(d / "www/evil.zip") +
                          "','w'); z.writestr('evil/images/train/a.png','x'); "
                          "z.writestr('../../owned.txt','x'); z.close()\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  AssetServer server(d / "www", d / "server");
  if (!server.ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  write_text(d / "cfg/evil.yaml",
             "path: ../datasets/evil\ntrain: images/train\nval: images/train\nnames: [a]\n"
             "download: " +
                 server.url("files", "evil.zip") + "\n");
  try {
    ensure_dataset(load_dataset_config(d / "cfg/evil.yaml"));
    FAIL() << "an escaping archive was unpacked";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("../../owned.txt"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(d / "owned.txt"));
  EXPECT_FALSE(fs::exists(d / "datasets/evil"));
  EXPECT_FALSE(fs::exists(d / "datasets/evil.zip"));
}

TEST(Download, OfflineFailureSaysWhatToFetch) {
  TempDir d;
  const std::string url = "http://127.0.0.1:9/data.zip";  // the discard port: nothing listens
  write_text(d / "cfg/x.yaml",
             "path: ../datasets/x\ntrain: images/train\nval: images/val\n"
             "names: [a]\ndownload: " +
                 url + "\n");
  const auto cfg = load_dataset_config(d / "cfg/x.yaml");
  setenv("YOLO_DOWNLOAD_ATTEMPTS", "1", 1);
  try {
    ensure_dataset(cfg);
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(url), std::string::npos) << msg;
    EXPECT_NE(msg.find(fs::path(d / "datasets").lexically_normal().string()), std::string::npos)
        << msg;
  }
  unsetenv("YOLO_DOWNLOAD_ATTEMPTS");
  // A script is never run: the message says to fetch the data by hand.
  write_text(d / "cfg/s.yaml",
             "path: ../datasets/y\ntrain: t\nval: v\nnames: [a]\n"
             "download: bash get.sh\n");
  try {
    ensure_dataset(load_dataset_config(d / "cfg/s.yaml"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("scripts are not run"), std::string::npos) << e.what();
  }
  write_text(d / "cfg/bad.yaml",
             "path: ../datasets/y\ntrain: t\nval: v\nnames: [a]\n"
             "download:\n  - {url: https://x.org/a.zip, dir: ../../etc}\n");
  EXPECT_THROW(load_dataset_config(d / "cfg/bad.yaml"), std::runtime_error);
}

TEST(Download, ShippedCocoYamlsNameTheirArchives) {
  const std::string data = project_root() + "/configs/data/";
  for (const char* name : {"coco8.yaml", "coco128.yaml"}) {
    const auto cfg = load_dataset_config(data + name);
    ASSERT_EQ(cfg.downloads.size(), 1u) << name;
    EXPECT_EQ(fs::path(cfg.downloads[0].dir), fs::path(cfg.root).parent_path()) << name;
    EXPECT_EQ(cfg.nc, 80) << name;
  }
  const auto coco = load_dataset_config(data + "coco.yaml");
  ASSERT_EQ(coco.downloads.size(), 4u);
  EXPECT_NE(coco.downloads[0].url.find("coco2017labels.zip"), std::string::npos);
  EXPECT_EQ(fs::path(coco.downloads[0].dir), fs::path(coco.root).parent_path());
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(fs::path(coco.downloads[i].dir), fs::path(coco.root) / "images");
  }
}

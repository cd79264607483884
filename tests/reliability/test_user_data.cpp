// Nothing of the user's is deleted or replaced, and messages name what the user typed: dataset
// archives the user already has, archives that would overwrite files beside the dataset, two
// runs fetching one dataset, downloads from servers that cannot resume, hosts that do not
// resolve, and the words of the yolo command and --hyp-set.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "../data/test_helpers.h"
#include "data/augment.h"
#include "data/dataset_config.h"
#include "tests/lib/asset_server.h"
#include "utils/command/yolo_command.h"
#include "utils/core/archive.h"
#include "utils/core/errors.h"
#include "utils/core/fetch.h"
#include "utils/core/format.h"
#include "utils/core/paths.h"
#include "utils/core/progress.h"
#include "utils/engine/hyp.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::AssetServer;
using yolo::test::make_split;
using yolo::test::TempDir;
using yolo::test::write_text;

namespace {

bool can_download() { return fetch_supported() && unpack_supported(); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Zips the entries of the folder `src` (its children at the archive's top) into `zip`.
void zip_children(const fs::path& src, const fs::path& zip) {
  fs::create_directories(zip.parent_path());
  std::string names;
  for (const auto& e : fs::directory_iterator(src)) names += " " + e.path().filename().string();
  const std::string cmd =
      "cd " + src.string() + " && python3 -m zipfile -c " + zip.string() + names + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
}

// A dataset folder `name` (2 train, 2 val images) zipped as `zip`, with `extra` files beside it
// at the archive's top (a Roboflow export holds data.yaml there).
void make_dataset_zip(const fs::path& work, const std::string& name, const fs::path& zip,
                      const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  const fs::path src = work / ("src_" + name);
  make_split((src / name).string(), "train", 2, 32, 32);
  make_split((src / name).string(), "val", 2, 32, 32);
  for (const auto& [file, text] : extra) write_text((src / file).string(), text);
  zip_children(src, zip);
}

std::string yaml_for(const std::string& root, const std::string& url) {
  return "path: " + root +
         "\ntrain: images/train\nval: images/val\nnames: [a, b]\ndownload: " + url + "\n";
}

FetchOptions quick(int attempts) {
  FetchOptions o;
  o.stall_timeout_s = 1;
  o.attempts = attempts;
  o.retry_wait_s = 0.05;
  o.progress = false;
  return o;
}

std::string fetch_error(const std::string& url, const std::string& path, const FetchOptions& o) {
  try {
    fetch_file(url, path, o);
  } catch (const FetchError& e) {
    return e.what();
  }
  return "";
}

std::string usage_error(const std::vector<std::string>& args) {
  try {
    translate_yolo_command(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

bool has_words(const std::vector<std::string>& argv, const std::string& a, const std::string& b) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == a && argv[i + 1] == b) return true;
  }
  return false;
}

}  // namespace

TEST(UsersFiles, FileUrlArchiveIsUnpackedWhereItIsAndKept) {
  if (!can_download()) GTEST_SKIP() << "built without libcurl or libarchive";
  TempDir d;
  // The user's own ds.zip beside the dataset folder it unpacks to.
  const fs::path zip = d / "datasets/ds.zip";
  make_dataset_zip(d.path(), "ds", zip);
  const std::string bytes = slurp(zip);
  write_text(d / "cfg/ds.yaml", yaml_for("../datasets/ds", "file://" + zip.string()));
  ensure_dataset(load_dataset_config(d / "cfg/ds.yaml"));
  EXPECT_TRUE(fs::exists(d / "datasets/ds/images/val/im1.png"));
  ASSERT_TRUE(fs::exists(zip)) << "the user's archive was deleted";
  EXPECT_EQ(slurp(zip), bytes);
  EXPECT_FALSE(fs::exists(zip.string() + ".part"));
}

TEST(UsersFiles, ArchiveOfTheUrlsNameAlreadyThereIsUsedAndKept) {
  if (!can_download()) GTEST_SKIP() << "built without libcurl or libarchive";
  TempDir d;
  const fs::path zip = d / "datasets/ds.zip";
  make_dataset_zip(d.path(), "ds", zip);
  // Nothing listens at the URL: the archive in the folder is all there is.
  write_text(d / "cfg/ds.yaml", yaml_for("../datasets/ds", "http://127.0.0.1:9/ds.zip"));
  ensure_dataset(load_dataset_config(d / "cfg/ds.yaml"));
  EXPECT_TRUE(fs::exists(d / "datasets/ds/labels/train/im0.txt"));
  EXPECT_TRUE(fs::exists(zip)) << "the archive the user put there was deleted";
}

TEST(UsersFiles, ArchiveNeverReplacesAFileBesideTheDataset) {
  if (!can_download()) GTEST_SKIP() << "built without libcurl or libarchive";
  TempDir d;
  // As a Roboflow export: the dataset folder and a data.yaml at the archive's top.
  make_dataset_zip(d.path(), "ds", d / "www/ds.zip", {{"data.yaml", "names: [archive's]\n"}});
  AssetServer server(d / "www", d / "server");
  if (!server.ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  // The user's data.yaml sits beside the folder the archive unpacks into.
  const std::string mine = yaml_for("ds", server.url("files", "ds.zip")) + "# my notes\n";
  write_text(d / "datasets/data.yaml", mine);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  ensure_dataset(load_dataset_config(d / "datasets/data.yaml"));
  const std::string printed =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(slurp(d / "datasets/data.yaml"), mine) << "the user's data.yaml was replaced";
  EXPECT_TRUE(fs::exists(d / "datasets/ds/images/train/im1.png"));
  EXPECT_NE(printed.find("not unpacked"), std::string::npos) << printed;
  EXPECT_NE(printed.find(d / "datasets/data.yaml"), std::string::npos) << printed;
  EXPECT_FALSE(fs::exists(d / "datasets/ds.zip")) << "the archive fetched here is removed";
}

TEST(UsersFiles, TwoRunsStartedTogetherFetchADatasetOnce) {
  if (!can_download()) GTEST_SKIP() << "built without libcurl or libarchive";
  TempDir d;
  make_dataset_zip(d.path(), "ds", d / "www/ds.zip");
  AssetServer server(d / "www", d / "server");
  if (!server.ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  write_text(d / "cfg/ds.yaml", yaml_for("../datasets/ds", server.url("files", "ds.zip")));
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        ensure_dataset(load_dataset_config(d / "cfg/ds.yaml"));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        status = 1;
      }
      std::fflush(nullptr);
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a run failed (see above)";
  }
  EXPECT_TRUE(fs::exists(d / "datasets/ds/images/val/im0.png"));
  int fetched = 0;
  for (const std::string& r : server.requests()) fetched += r.find("ds.zip") != std::string::npos;
  EXPECT_EQ(fetched, 1) << "the second run did not wait for the first one's download";
}

class Resumeless : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fetch_supported()) GTEST_SKIP() << "built without libcurl";
    std::mt19937 rng(3);
    std::string payload(300000, '\0');
    for (char& c : payload) c = static_cast<char>(rng());
    write_text(d / "www/w.pt", payload);
    server = std::make_unique<AssetServer>(d / "www", d / "server");
    if (!server->ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  }
  std::vector<std::string> requests(const std::string& mode) const {
    std::vector<std::string> out;
    for (const std::string& r : server->requests()) {
      if (r.rfind("/" + mode + "/", 0) == 0) out.push_back(r);
    }
    return out;
  }
  TempDir d;
  std::unique_ptr<AssetServer> server;
};

TEST_F(Resumeless, StallingServerIsAskedAgainFromTheStartAndTheStallIsNamed) {
  const std::string out = d / "w.pt";
  const std::string msg = fetch_error(server->url("norangestall", "w.pt"), out, quick(2));
  EXPECT_NE(msg.find("after 2 attempts (stalled: no data for 1 s after 1024 bytes"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("cannot resume"), std::string::npos) << msg;
  // Attempt 1; attempt 2 asks for the rest, gets the whole file, and asks again from byte 0.
  const auto reqs = requests("norangestall");
  ASSERT_EQ(reqs.size(), 3u) << "the second attempt was not a real download";
  EXPECT_EQ(reqs[1], "/norangestall/w.pt bytes=1024-");
  EXPECT_EQ(reqs[2], "/norangestall/w.pt -");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".part")) << "a .part no server can continue was kept";
}

TEST_F(Resumeless, ShortBodyIsNamed) {
  const std::string msg = fetch_error(server->url("norangecut", "w.pt"), d / "w.pt", quick(2));
  EXPECT_NE(msg.find("the server sent 150000 of the 300000 bytes it announced"), std::string::npos)
      << msg;
  EXPECT_EQ(requests("norangecut").size(), 3u);
}

TEST(UsersDownloads, UnresolvableHostIsNotRetried) {
  if (!fetch_supported()) GTEST_SKIP() << "built without libcurl";
  TempDir d;
  // Asked directly, not through a proxy that would answer for the host.
  for (const char* v :
       {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"}) {
    unsetenv(v);
  }
  FetchOptions o = quick(3);
  o.retry_wait_s = 30;  // a retry would show in the time taken
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = fetch_error("http://nonexistent.invalid/w.pt", d / "w.pt", o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(msg.find("http://nonexistent.invalid/w.pt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not retried"), std::string::npos) << msg;
  EXPECT_LT(s, 30) << msg;
  EXPECT_FALSE(fs::exists(d / "w.pt.part"));
}

TEST(UsersDownloads, ProgressCountsMegabytesPerSecond) {
  const std::string bar = format_progress("Downloading w.pt", 2500000, 10000000, 2.0, 0, true);
  EXPECT_NE(bar.find("2.50/10.0 MB [00:02<00:06, 1.25 MB/s]"), std::string::npos) << bar;
}

TEST(UsersWords, YoloCommandJoinsSpacedEqualsAsUltralytics) {
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"train", "epochs", "=", "7"},
        std::vector<std::string>{"train", "epochs=", "7"},
        std::vector<std::string>{"train", "epochs", "=7"}}) {
    EXPECT_TRUE(has_words(translate_yolo_command(words).argv, "--epochs", "7")) << words[1];
  }
  EXPECT_NE(usage_error({"train", "=7"}).find("needs a key"), std::string::npos);
}

TEST(UsersWords, YoloCommandNamesTheKeyAsTyped) {
  EXPECT_NE(usage_error({"train", "lr0"}).find("lr0: give a value (lr0="), std::string::npos)
      << usage_error({"train", "lr0"});
  EXPECT_NE(usage_error({"val", "lr0=0.1"}).find("applies to yolo train, not val"),
            std::string::npos);
  const std::string typo = usage_error({"train", "modle=yolov5n.yaml"});
  EXPECT_NE(typo.find("did you mean 'model' or 'mode'?"), std::string::npos) << typo;
  EXPECT_NE(usage_error({"train", "lr0=abc"}).find("lr0=abc: lr0 must be a number"),
            std::string::npos);
}

TEST(UsersWords, ResumeWithAHyperparameterIsRefusedByName) {
  const std::string msg =
      usage_error({"train", "resume", "model=runs/x/weights/last.pt", "lr0=0.5"});
  EXPECT_NE(msg.find("lr0=0.5: a resumed run trains on with its own hyperparameters"),
            std::string::npos)
      << msg;
  EXPECT_TRUE(usage_error({"train", "resume", "model=runs/x/weights/last.pt"}).empty());
}

TEST(UsersWords, HypSetErrorsNameTheWordNotTheFile) {
  const Hyp file = load_hyp(project_root() + "/hyp/hyp.scratch-low.yaml");
  for (const auto& [flag, word] : {std::pair<std::string, std::string>{"--hyp-set", "--hyp-set "},
                                   std::pair<std::string, std::string>{"", ""}}) {
    try {
      apply_hyp_set(file, {"lr0=-1"}, flag);
      FAIL() << "lr0=-1 taken";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), word + "lr0=-1: 'lr0' must be >= 0");
    }
    // Augmentation ranges are checked with the data: the word that set the value is named.
    const Hyp h = apply_hyp_set(file, {"mosaic=2"}, flag);
    std::map<std::string, double> values;
    for (const auto& k : required_hyp_keys()) values[k] = h.at(k);
    try {
      AugmentHyp::from_map(values, "hyp/hyp.scratch-low.yaml", hyp_set_words({"mosaic=2"}, flag));
      FAIL() << "mosaic=2 taken";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), word + "mosaic=2: key 'mosaic' is out of range (0..1)");
    }
  }
  // A value from the file is still named by the file.
  std::map<std::string, double> values;
  for (const auto& k : required_hyp_keys()) values[k] = file.at(k);
  values["fliplr"] = 1.5;
  try {
    AugmentHyp::from_map(values, "hyp/x.yaml", hyp_set_words({"mosaic=0.5"}));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "hyp/x.yaml: key 'fliplr' is out of range (0..1)");
  }
}

TEST(UsersWords, PrintedPathsPasteIntoAShellAsOneWord) {
  TempDir d;
  for (const std::string& s :
       {std::string("runs/a b/weights/best.pt"), std::string("it's"), std::string("$(touch x)"),
        std::string("a;b&c|d`e`"), std::string("plain/path-1.pt"), std::string("")}) {
    const std::string cmd =
        "cd " + shell_word(d.path()) + " && printf '%s' " + shell_word(s) + " > out";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    EXPECT_EQ(slurp(d / "out"), s) << cmd;
    EXPECT_FALSE(fs::exists(d / "x")) << "the word ran a command: " << cmd;
  }
  EXPECT_EQ(shell_word("plain/path-1.pt"), "plain/path-1.pt");
  // A newline cannot start a forged line of the log.
  EXPECT_EQ(shell_word("a\nWARNING: x").find('\n'), std::string::npos);
}

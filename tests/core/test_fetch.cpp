// Downloads from a loopback server (tests/lib/asset_server.py) and archive unpacking: what a user
// on a bad link or with a hostile archive relies on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/lib/asset_server.h"
#include "utils/core/archive.h"
#include "utils/core/fetch.h"

namespace fs = std::filesystem;
using yolo::test::AssetServer;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string random_bytes(size_t n) {
  std::mt19937 rng(7);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A folder of its own under the temp dir, removed at the end.
struct Scratch {
  fs::path dir =
      fs::temp_directory_path() / ("yolo_fetch_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

yolo::FetchOptions quick() {
  yolo::FetchOptions o;
  o.stall_timeout_s = 2;
  o.attempts = 3;
  o.retry_wait_s = 0.05;
  return o;
}

int count_requests(const AssetServer& s, const std::string& needle) {
  int n = 0;
  for (const std::string& r : s.requests()) n += r.find(needle) != std::string::npos;
  return n;
}

}  // namespace

class Fetch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!yolo::fetch_supported()) GTEST_SKIP() << "built without libcurl";
    write_bytes(scratch.dir / "www/w.pt", payload);
    server = std::make_unique<AssetServer>((scratch.dir / "www").string(),
                                           (scratch.dir / "server").string());
    if (!server->ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  }
  Scratch scratch;
  const std::string payload = random_bytes(300000);
  std::unique_ptr<AssetServer> server;
};

TEST_F(Fetch, DownloadsWholeWithAProgressBarAndLeavesNoPart) {
  const fs::path out = scratch.dir / "cache/sub/w.pt";
  testing::internal::CaptureStdout();
  const int64_t n = yolo::fetch_file(server->url("files", "w.pt"), out.string(), quick());
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_EQ(n, static_cast<int64_t>(payload.size()));
  EXPECT_EQ(slurp(out), payload);
  EXPECT_FALSE(fs::exists(out.string() + ".part"));
  EXPECT_NE(printed.find("Downloading w.pt"), std::string::npos) << printed;
  EXPECT_NE(printed.find("0.30/0.30 MB"), std::string::npos) << printed;
  EXPECT_NE(printed.find(" MB/s]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("100%"), std::string::npos) << printed;
}

TEST_F(Fetch, RefusedUrlFailsAtOnceNamingItAndWritesNothing) {
  const fs::path out = scratch.dir / "x.pt";
  const std::string url = server->url("files", "nothing.pt");
  try {
    yolo::fetch_file(url, out.string(), quick());
    FAIL() << "no error";
  } catch (const yolo::FetchError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(url), std::string::npos) << msg;
    EXPECT_NE(msg.find("HTTP 404"), std::string::npos) << msg;
    EXPECT_NE(msg.find(out.string()), std::string::npos) << msg;
  }
  EXPECT_EQ(count_requests(*server, "nothing.pt"), 1);  // a refusal is not retried
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".part"));
}

TEST_F(Fetch, InterruptedBodyIsResumedWithARange) {
  const fs::path out = scratch.dir / "w.pt";
  yolo::fetch_file(server->url("cut", "w.pt"), out.string(), quick());
  EXPECT_EQ(slurp(out), payload);
  const auto reqs = server->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0], "/cut/w.pt -");
  EXPECT_EQ(reqs[1], "/cut/w.pt bytes=" + std::to_string(payload.size() / 2) + "-");
}

TEST_F(Fetch, TruncatedEveryTimeFailsAndKeepsThePartForTheNextRun) {
  const fs::path out = scratch.dir / "w.pt";
  yolo::FetchOptions o = quick();
  o.attempts = 2;
  try {
    yolo::fetch_file(server->url("alwayscut", "w.pt"), out.string(), o);
    FAIL() << "a short body was accepted";
  } catch (const yolo::FetchError& e) {
    EXPECT_NE(std::string(e.what()).find("after 2 attempts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(".part"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  // Half, then half of the rest.
  EXPECT_EQ(fs::file_size(out.string() + ".part"), payload.size() / 2 + (payload.size() / 2) / 2);
  // The next run continues where it stopped.
  yolo::fetch_file(server->url("files", "w.pt"), out.string(), quick());
  EXPECT_EQ(slurp(out), payload);
  EXPECT_EQ(server->requests().back(),
            "/files/w.pt bytes=" + std::to_string(fs::file_size(out) * 3 / 4) + "-");
}

TEST_F(Fetch, StalledServerTimesOut) {
  const fs::path out = scratch.dir / "w.pt";
  yolo::FetchOptions o = quick();
  o.stall_timeout_s = 1;
  o.attempts = 2;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(yolo::fetch_file(server->url("stall", "w.pt"), out.string(), o), yolo::FetchError);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 30) << "the stall timeout did not fire";
  EXPECT_EQ(count_requests(*server, "/stall/"), 2);
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(Fetch, ServerWithoutRangesRestartsThePart) {
  const fs::path out = scratch.dir / "w.pt";
  write_bytes(out.string() + ".part", "garbage that is not the file's start");
  yolo::fetch_file(server->url("norange", "w.pt"), out.string(), quick());
  EXPECT_EQ(slurp(out), payload);
}

TEST_F(Fetch, OfflineFailsNamingTheUrl) {
  const std::string url = "http://127.0.0.1:9/w.pt";  // the discard port: nothing listens
  yolo::FetchOptions o = quick();
  o.attempts = 2;
  try {
    yolo::fetch_file(url, (scratch.dir / "w.pt").string(), o);
    FAIL();
  } catch (const yolo::FetchError& e) {
    EXPECT_NE(std::string(e.what()).find(url), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(scratch.dir / "w.pt.part")) << "an empty .part was left";
}

TEST(FetchOptions, EnvironmentSetsTimeoutAndAttempts) {
  setenv("YOLO_DOWNLOAD_TIMEOUT", "7", 1);
  setenv("YOLO_DOWNLOAD_ATTEMPTS", "5", 1);
  yolo::FetchOptions o = yolo::fetch_options_from_env();
  EXPECT_EQ(o.stall_timeout_s, 7);
  EXPECT_EQ(o.attempts, 5);
  setenv("YOLO_DOWNLOAD_TIMEOUT", "soon", 1);
  EXPECT_EQ(yolo::fetch_options_from_env().stall_timeout_s, yolo::FetchOptions().stall_timeout_s);
  unsetenv("YOLO_DOWNLOAD_TIMEOUT");
  unsetenv("YOLO_DOWNLOAD_ATTEMPTS");
}

// Archives made with Python's zipfile and tarfile, entries as given.
class Unpack : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!yolo::unpack_supported()) GTEST_SKIP() << "built without libarchive";
  }
  // entries: "name=content" pairs; a name ending in '@' makes a symlink to content.
  fs::path make_zip(const std::string& name, const std::vector<std::string>& entries) {
    const fs::path out = scratch.dir / name;
    std::string py =
        "import zipfile,sys\nz=zipfile.ZipFile(sys.argv[1],'w',zipfile.ZIP_DEFLATED)\n";
    for (const std::string& e : entries) {
      const size_t eq = e.find('=');
      std::string n = e.substr(0, eq), content = e.substr(eq + 1);
      if (n.back() == '@') {
        n.pop_back();
        py += "i=zipfile.ZipInfo('" + n + "');i.external_attr=0o120777<<16\nz.writestr(i,'" +
              content + "')\n";
      } else {
        py += "z.writestr('" + n + "'," + content + ")\n";
      }
    }
    py += "z.close()\n";
    write_bytes(scratch.dir / "make.py", py);
    const std::string cmd = "python3 " + (scratch.dir / "make.py").string() + " " + out.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << py;
    return out;
  }
  Scratch scratch;
};

TEST_F(Unpack, ZipAndTarGzUnpackAndMergeIntoTheFolder) {
  const fs::path zip = make_zip("d.zip", {"data/images/a.txt='one'", "data/labels/a.txt='1 0 0'"});
  const fs::path dest = scratch.dir / "out";
  write_bytes(dest / "data/images/a.txt", "old");
  write_bytes(dest / "data/images/keep.txt", "kept");
  std::vector<std::string> kept;
  EXPECT_EQ(yolo::unpack_archive(zip.string(), dest.string(), {}, &kept), 2);
  EXPECT_EQ(slurp(dest / "data/images/a.txt"), "old");  // the user's, not replaced
  EXPECT_EQ(kept, std::vector<std::string>{(dest / "data/images/a.txt").string()});
  EXPECT_EQ(slurp(dest / "data/images/keep.txt"), "kept");
  EXPECT_EQ(slurp(dest / "data/labels/a.txt"), "1 0 0");
  for (const auto& e : fs::directory_iterator(dest)) EXPECT_EQ(e.path().filename(), "data");

  write_bytes(scratch.dir / "src/t/x.txt", "tar");
  const std::string cmd = "cd " + (scratch.dir / "src").string() + " && tar -czf ../t.tar.gz t";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(yolo::unpack_archive((scratch.dir / "t.tar.gz").string(), dest.string()), 1);
  EXPECT_EQ(slurp(dest / "t/x.txt"), "tar");
}

TEST_F(Unpack, EntriesLeavingTheFolderAreRefusedAndNothingIsWritten) {
  const fs::path dest = scratch.dir / "out";
  for (const std::string bad : {"../evil.txt", "/tmp/evil_abs.txt", "a/../../evil.txt"}) {
    const fs::path zip = make_zip("bad.zip", {"ok.txt='fine'", bad + "='x'"});
    try {
      yolo::unpack_archive(zip.string(), dest.string());
      FAIL() << bad << " was unpacked";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(scratch.dir / "evil.txt"));
    EXPECT_FALSE(fs::exists(dest / "ok.txt")) << "a refused archive left files";
  }
  EXPECT_FALSE(fs::exists("/tmp/evil_abs.txt"));
  const fs::path link = make_zip("link.zip", {"l@=/etc/passwd"});
  EXPECT_THROW(yolo::unpack_archive(link.string(), dest.string()), std::runtime_error);
  EXPECT_FALSE(fs::exists(dest / "l"));
}

TEST_F(Unpack, ExpansionBeyondTheBoundIsRefused) {
  const fs::path zip = make_zip("bomb.zip", {"zeros.bin=b'\\0'*(8<<20)"});
  EXPECT_LT(fs::file_size(zip), 100000u);
  yolo::UnpackLimits limits;
  limits.max_bytes = 4 << 20;
  const fs::path dest = scratch.dir / "out";
  try {
    yolo::unpack_archive(zip.string(), dest.string(), limits);
    FAIL() << "unpacked 8 MB past a 4 MB bound";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("zip bomb"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dest));
  limits.max_bytes = 16 << 20;
  EXPECT_EQ(yolo::unpack_archive(zip.string(), dest.string(), limits), 1);
  EXPECT_EQ(fs::file_size(dest / "zeros.bin"), 8u << 20);
}

TEST_F(Unpack, NotAnArchiveNamesTheFile) {
  write_bytes(scratch.dir / "page.zip", "<html>proxy error</html>");
  try {
    yolo::unpack_archive((scratch.dir / "page.zip").string(), (scratch.dir / "out").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("page.zip"), std::string::npos) << e.what();
  }
}

TEST(ArchiveUrl, KnownSchemesAndSuffixes) {
  EXPECT_TRUE(yolo::is_archive_url("https://x.org/a/coco128.zip"));
  EXPECT_TRUE(yolo::is_archive_url("http://x.org/a.tar.gz"));
  EXPECT_TRUE(yolo::is_archive_url("file:///data/a.tgz"));
  EXPECT_FALSE(yolo::is_archive_url("bash data/scripts/get_coco.sh"));
  EXPECT_FALSE(yolo::is_archive_url("https://x.org/a.pt"));
  EXPECT_FALSE(yolo::is_archive_url("ftp://x.org/a.zip"));
}

// Released weights by name: fetched from a mirror (YOLO_WEIGHTS_URL, here a loopback server)
// into the cache (YOLO_WEIGHTS_DIR), checked, and read from the cache the next time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/weights.h"
#include "models/weights_hub.h"
#include "tests/lib/asset_server.h"
#include "utils/core/fetch.h"

namespace fs = std::filesystem;
using yolo::test::AssetServer;

namespace {

struct Env {
  Env(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~Env() { unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST(WeightsHub, ReleasedNamesAndTheirUrls) {
  EXPECT_EQ(yolo::released_weights_url("yolov5s.pt"),
            "https://github.com/ultralytics/yolov5/releases/download/v7.0/yolov5s.pt");
  EXPECT_EQ(yolo::released_weights_url("yolov5n6.pt"),
            "https://github.com/ultralytics/yolov5/releases/download/v7.0/yolov5n6.pt");
  EXPECT_EQ(yolo::released_weights_url("yolo11n.pt"),
            "https://github.com/ultralytics/assets/releases/download/v8.4.0/yolo11n.pt");
  EXPECT_EQ(yolo::released_weights_url("yolo26x.pt"),
            "https://github.com/ultralytics/assets/releases/download/v8.4.0/yolo26x.pt");
  EXPECT_EQ(yolo::released_weights_url("yolov8m.pt"),
            "https://github.com/ultralytics/assets/releases/download/v8.4.0/yolov8m.pt");
  EXPECT_EQ(yolo::released_weights_url("best.pt"), "");
  EXPECT_EQ(yolo::released_weights_url("runs/yolov5s.pt"), "");
  {
    const Env mirror("YOLO_WEIGHTS_URL", "http://mirror.local/w/");
    EXPECT_EQ(yolo::released_weights_url("yolo11s.pt"), "http://mirror.local/w/yolo11s.pt");
  }
  // Not released names, and files that exist, are left to the caller.
  EXPECT_EQ(yolo::resolve_weights("nothing_here.pt"), "nothing_here.pt");
}

TEST(WeightsHub, DownloadsChecksAndThenReadsTheCache) {
  if (!yolo::fetch_supported()) GTEST_SKIP() << "built without libcurl";
  const fs::path d = fs::temp_directory_path() / ("yolo_hub_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "www");
  yolo::StateDict sd;
  sd["model.0.conv.weight"] = torch::randn({4, 3, 3, 3});
  yolo::write_state_dict(sd, (d / "www/yolov5n.pt").string());
  std::ofstream(d / "www/yolo11n.pt") << "<html>a proxy's error page</html>";
  AssetServer server((d / "www").string(), (d / "server").string());
  if (!server.ok()) GTEST_SKIP() << "python3 could not start the loopback server";
  const Env mirror("YOLO_WEIGHTS_URL", server.url("files", ""));
  const Env cache("YOLO_WEIGHTS_DIR", (d / "cache").string());

  const std::string path = yolo::resolve_weights("yolov5n.pt");
  EXPECT_EQ(fs::path(path), d / "cache/yolov5n.pt");
  EXPECT_TRUE(
      yolo::read_state_dict(path).at("model.0.conv.weight").equal(sd["model.0.conv.weight"]));
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(yolo::resolve_weights("yolov5n.pt"), path);  // the cache: no second request
  EXPECT_EQ(server.requests().size(), 1u);

  // What the server sends must be weights: refused, removed, and the message says what to do.
  try {
    yolo::resolve_weights("yolo11n.pt");
    FAIL() << "an HTML page was taken as weights";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("is not weights"), std::string::npos) << msg;
    EXPECT_NE(msg.find((d / "cache/yolo11n.pt").string()), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(d / "cache/yolo11n.pt"));
  EXPECT_FALSE(fs::exists(d / "cache/yolo11n.pt.download"));

  // Missing on the server: one line with the URL and where to put the file.
  try {
    yolo::resolve_weights("yolo26n.pt");
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(server.url("files", "yolo26n.pt")), std::string::npos) << msg;
    EXPECT_NE(msg.find("HTTP 404"), std::string::npos) << msg;
    EXPECT_NE(msg.find("put it at " + (d / "cache/yolo26n.pt").string()), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  fs::remove_all(d);
}

// Each verify_image_label failure (YOLOv5 v7.0 verify_image_label, plus class ids >= nc).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>

#include "data/verify.h"
#include "test_helpers.h"

using namespace yolo;
using yolo::test::TempDir;
using yolo::test::write_image;
using yolo::test::write_text;

namespace {

struct VerifyFixture : ::testing::Test {
  TempDir d;
  std::string img, lbl;
  void SetUp() override {
    img = d / "images/a.png";
    lbl = d / "labels/a.txt";
    write_image(img, cv::Mat(32, 48, CV_8UC3, cv::Scalar(1, 2, 3)));
  }
  VerifiedImage check(const std::string& labels, int nc = 3) {
    write_text(lbl, labels);
    return verify_image_label(img, lbl, nc);
  }
  void expect_corrupt(const std::string& labels, const std::string& why, int nc = 3) {
    const auto r = check(labels, nc);
    EXPECT_TRUE(r.corrupt) << labels;
    EXPECT_NE(r.message.find(why), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(img), std::string::npos) << r.message;
  }
};

}  // namespace

TEST_F(VerifyFixture, GoodLabels) {
  const auto r = check("0 0.5 0.5 0.2 0.3\n\n2 0.1 0.2 0.1 0.1\n");
  EXPECT_FALSE(r.corrupt);
  EXPECT_EQ(r.width, 48);
  EXPECT_EQ(r.height, 32);
  ASSERT_EQ(r.labels.size(), 2u);
  EXPECT_FLOAT_EQ(r.labels[1].cls, 2);
  EXPECT_FLOAT_EQ(r.labels[0].h, 0.3f);
}

TEST_F(VerifyFixture, MissingAndEmptyLabels) {
  auto r = verify_image_label(img, d / "labels/none.txt", 3);
  EXPECT_FALSE(r.corrupt);
  EXPECT_TRUE(r.label_missing);
  r = check("\n  \n");
  EXPECT_FALSE(r.corrupt);
  EXPECT_TRUE(r.label_empty);
  EXPECT_TRUE(r.labels.empty());
}

TEST_F(VerifyFixture, BadColumns) { expect_corrupt("0 0.5 0.5 0.2\n", "5 columns"); }
TEST_F(VerifyFixture, SixColumns) { expect_corrupt("0 0.5 0.5 0.2 0.1 0.3\n", "5 columns"); }
TEST_F(VerifyFixture, Negative) { expect_corrupt("0 0.5 -0.5 0.2 0.2\n", "negative"); }
TEST_F(VerifyFixture, OutOfRange) { expect_corrupt("0 0.5 1.5 0.2 0.2\n", "out of bounds"); }
TEST_F(VerifyFixture, NonNumeric) { expect_corrupt("0 0.5 abc 0.2 0.2\n", "not a finite"); }
TEST_F(VerifyFixture, NaN) { expect_corrupt("0 nan 0.5 0.2 0.2\n", "not a finite"); }
TEST_F(VerifyFixture, Inf) { expect_corrupt("0 0.5 0.5 inf 0.2\n", "not a finite"); }
TEST_F(VerifyFixture, ClassTooLarge) { expect_corrupt("3 0.5 0.5 0.2 0.2\n", "nc=3"); }
TEST_F(VerifyFixture, ClassNotInteger) { expect_corrupt("1.5 0.5 0.5 0.2 0.2\n", "integer"); }

TEST_F(VerifyFixture, LineNumberInMessage) {
  expect_corrupt("0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2\n", "a.txt:2");
}

TEST_F(VerifyFixture, DuplicatesRemoved) {
  const auto r = check("0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n");
  EXPECT_FALSE(r.corrupt);
  EXPECT_EQ(r.labels.size(), 2u);
  EXPECT_NE(r.message.find("duplicate"), std::string::npos);
}

TEST_F(VerifyFixture, PolygonBecomesBox) {
  const auto r = check("1 0.1 0.2 0.5 0.2 0.5 0.6 0.1 0.6\n");
  ASSERT_FALSE(r.corrupt) << r.message;
  ASSERT_EQ(r.labels.size(), 1u);
  EXPECT_NEAR(r.labels[0].cx, 0.3, 1e-6);
  EXPECT_NEAR(r.labels[0].cy, 0.4, 1e-6);
  EXPECT_NEAR(r.labels[0].w, 0.4, 1e-6);
  EXPECT_NEAR(r.labels[0].h, 0.4, 1e-6);
}

// A label path that is a directory or a FIFO is not read (as empty, or blocking forever): the
// image counts as missing its labels, as in YOLOv5, and the path is named.
TEST_F(VerifyFixture, LabelPathThatIsNoFile) {
  std::filesystem::create_directories(lbl);
  auto r = verify_image_label(img, lbl, 3);
  EXPECT_FALSE(r.corrupt);
  EXPECT_TRUE(r.label_missing);
  EXPECT_FALSE(r.label_empty);
  EXPECT_NE(r.message.find(lbl + ": not a regular file"), std::string::npos) << r.message;
  const std::string fifo = d / "labels/f.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = verify_image_label(img, fifo, 3);
  EXPECT_TRUE(r.label_missing);
  EXPECT_NE(r.message.find(fifo), std::string::npos) << r.message;
}

// A byte-order mark before the first label (Windows editors write one) is skipped, as YOLOv5's
// reader skips it, and the label reads as written.
TEST_F(VerifyFixture, ByteOrderMarkIsSkipped) {
  const auto r = check(
      "\xEF\xBB\xBF"
      "1 0.5 0.5 0.2 0.2\n2 0.3 0.3 0.1 0.1\n");
  EXPECT_FALSE(r.corrupt) << r.message;
  ASSERT_EQ(r.labels.size(), 2u);
  EXPECT_EQ(r.labels[0].cls, 1);
  // Only at the start of the file: elsewhere it is junk in a value.
  expect_corrupt(
      "1 0.5 0.5 0.2 0.2\n\xEF\xBB\xBF"
      "2 0.3 0.3 0.1 0.1\n",
      ":2: value");
}

// A label file that is there but cannot be read is corrupt and named (YOLOv5 skips the image):
// taken as missing, its image would train as background. Root reads any file, so as root the
// check runs in a child process that has become user nobody.
TEST_F(VerifyFixture, UnreadableLabelFileIsCorrupt) {
  write_text(lbl, "1 0.5 0.5 0.2 0.2\n");
  ASSERT_EQ(::chmod(lbl.c_str(), 0), 0);
  auto run = [&] {
    const auto r = verify_image_label(img, lbl, 3);
    return r.corrupt && !r.label_missing && r.labels.empty() &&
           r.message.find("cannot read label file " + lbl) != std::string::npos;
  };
  if (::geteuid() != 0) {
    EXPECT_TRUE(run());
    return;
  }
  for (const auto& p : {d.path(), d / "images", d / "labels"}) ::chmod(p.c_str(), 0755);
  ::chmod(img.c_str(), 0644);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
    ::_exit(run() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot become user nobody";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the unreadable label file was not reported corrupt";
}

// An image path that is a directory or a FIFO is corrupt, named, never opened.
TEST(Verify, ImagePathThatIsNoFile) {
  TempDir d;
  std::filesystem::create_directories(d / "images/dir.jpg");
  auto r = verify_image_label(d / "images/dir.jpg", d / "labels/dir.txt", 1);
  EXPECT_TRUE(r.corrupt);
  EXPECT_NE(r.message.find("not a regular file"), std::string::npos) << r.message;
  const std::string fifo = d / "images/f.jpg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = verify_image_label(fifo, d / "labels/f.txt", 1);
  EXPECT_TRUE(r.corrupt);
  EXPECT_NE(r.message.find(fifo), std::string::npos) << r.message;
}

TEST(Verify, TinyImage) {
  TempDir d;
  write_image(d / "images/t.png", cv::Mat(9, 40, CV_8UC3, cv::Scalar::all(9)));
  const auto r = verify_image_label(d / "images/t.png", d / "labels/t.txt", 1);
  EXPECT_TRUE(r.corrupt);
  EXPECT_NE(r.message.find("under 10"), std::string::npos) << r.message;
}

TEST(Verify, UndecodableImage) {
  TempDir d;
  write_text(d / "images/bad.jpg", "this is not a jpeg");
  const auto r = verify_image_label(d / "images/bad.jpg", d / "labels/bad.txt", 1);
  EXPECT_TRUE(r.corrupt);
  EXPECT_NE(r.message.find("decode"), std::string::npos) << r.message;
  const auto m = verify_image_label(d / "images/missing.jpg", d / "labels/missing.txt", 1);
  EXPECT_TRUE(m.corrupt);
}

TEST(Verify, TruncatedJpeg) {
  TempDir d;
  cv::Mat im(64, 64, CV_8UC3);
  cv::randu(im, cv::Scalar::all(0), cv::Scalar::all(255));
  std::vector<uchar> buf;
  cv::imencode(".jpg", im, buf);
  ASSERT_EQ(buf[buf.size() - 2], 0xFF);
  ASSERT_EQ(buf.back(), 0xD9);
  write_text(d / "images/ok.jpg", std::string(buf.begin(), buf.end()));
  EXPECT_FALSE(verify_image_label(d / "images/ok.jpg", d / "labels/ok.txt", 1).corrupt);
  write_text(d / "images/cut.jpg", std::string(buf.begin(), buf.end() - 2));
  const auto r = verify_image_label(d / "images/cut.jpg", d / "labels/cut.txt", 1);
  EXPECT_TRUE(r.corrupt);
  EXPECT_NE(r.message.find("FFD9"), std::string::npos) << r.message;
}

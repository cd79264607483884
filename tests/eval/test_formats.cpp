// File formats other tools read or write: JSON, COCO evaluation; terminal-safe text.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "utils/core/format.h"
#include "utils/core/log.h"
#include "utils/eval/coco_eval.h"
#include "utils/eval/json.h"

namespace fs = std::filesystem;
using namespace yolo;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

CocoBox box(const std::string& img, int64_t cat, double x, double y, double w, double h,
            double score = 0, int64_t id = 0) {
  CocoBox b;
  b.image_id = img;
  b.category_id = cat;
  b.x = x, b.y = y, b.w = w, b.h = h;
  b.score = score;
  b.area = w * h;
  b.id = id;
  return b;
}

CocoGroundTruth ground_truth(std::vector<CocoBox> anns) {
  CocoGroundTruth gt;
  gt.image_ids = {"1", "2"};
  gt.category_ids = {1, 2};
  gt.annotations = std::move(anns);
  return gt;
}

}  // namespace

// The error read_json_file throws for `text`, or "" when it reads.
std::string json_error(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
  try {
    read_json_file(file.string(), [](json::document& doc) { json_skip(doc.get_value()); });
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Json, ReadsNestingAndEscapesAndQuotes) {
  const fs::path dir = temp_dir("json_read");
  const std::string path = (dir / "t.json").string();
  std::ofstream(path) << R"({"a": [1, -2.5e1, true, null], "s": "x\"\u00e9\n\ud83d\ude00",
                             "seg": [[1,2],[3]], "o": {}})";
  std::vector<double> numbers;
  std::string s;
  read_json_file(path, [&](json::document& doc) {
    for (auto member : doc.get_object()) {
      const std::string_view key = member.unescaped_key().value();
      json::value v = member.value().value();
      double d = 0;
      if (key == "a") {
        for (auto item : v.get_array()) {
          json::value x = item.value();
          if (json_number(x, d)) {
            numbers.push_back(d);
          } else {
            json_skip(x);
          }
        }
      } else if (key == "s") {
        s = std::string(v.get_string().value());
      } else {
        EXPECT_FALSE(json_number(v, d));
        json_skip(v);
      }
    }
  });
  EXPECT_EQ(numbers, (std::vector<double>{1, -25}));
  EXPECT_EQ(s, "x\"\xc3\xa9\n\xf0\x9f\x98\x80");
  EXPECT_EQ(json_quote("a\"b\n\x01"), "\"a\\\"b\\n\\u0001\"");
  fs::remove_all(dir);
}

// Malformed text anywhere, kept or skipped, fails naming the file, line and column.
TEST(Json, ErrorsNameTheFileLineAndColumn) {
  const fs::path dir = temp_dir("json_errors");
  const std::string f = (dir / "f.json").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\n  \"a\": [1, 2,,]\n}", ":2:14: malformed JSON"},
      {"{} x", ":1:4: unexpected text after the JSON value"},
      {"[1]]", ":1:4: unexpected text after the JSON value"},
      {"{\"a\": [1, 2, 3],\n \"b\": \"abc}", ":2:7: a string opened here is never closed"},
      {"[\"ok\",\n \"caf\xc3\"]", ":2:6: invalid UTF-8"},
      {"{\"seg\": [[1.5, 2.x]]}", ":1:16: malformed number"},
      {"{\"a\": tru}", ":1:7: unexpected character"},
      {"{\"a\": nul}", ":1:7: unexpected character"},
      {"{\"a\": \"x\\q\"}", ":1:12: malformed string"},
      {"{\"a\" 1}", ":1:6: malformed JSON"},
      {"  \n ", ": no JSON value"},
  };
  for (const auto& [text, want] : cases) {
    const std::string got = json_error(f, text);
    EXPECT_EQ(got.rfind(f + want, 0), 0u) << "text: " << text << "\ngot: " << got;
  }
  EXPECT_EQ(json_error(f, "{\"a\": [1, {\"b\": null}], \"c\": \"\\u00e9\"}"), "");
  const std::string missing = (dir / "missing.json").string();
  try {
    read_json_file(missing, [](json::document&) {});
    FAIL() << "a missing file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open (No such file or directory)");
  }
  fs::remove_all(dir);
}

TEST(CocoEval, ImageIdsAreNumbersForDigitStemsAsYolov5Makes) {
  EXPECT_EQ(coco_image_id_json("000000000139"), "139");
  EXPECT_EQ(coco_image_id_json("val_0001"), "\"val_0001\"");
  EXPECT_EQ(coco_image_key("000000000139"), "139");
  ASSERT_EQ(coco80_to_coco91().size(), 80u);
  EXPECT_EQ(coco80_to_coco91()[11], 13);  // stop sign: COCO's id 12 is unused
  EXPECT_EQ(coco80_to_coco91()[79], 90);
}

TEST(CocoEval, PerfectDetectionsScoreOneAndMissesScoreByRecall) {
  const CocoGroundTruth gt =
      ground_truth({box("1", 1, 10, 10, 20, 20, 0, 1), box("2", 1, 50, 50, 40, 40, 0, 2),
                    box("2", 2, 0, 0, 100, 100, 0, 3)});
  const CocoStats perfect =
      coco_evaluate(gt, {box("1", 1, 10, 10, 20, 20, 0.9), box("2", 1, 50, 50, 40, 40, 0.8),
                         box("2", 2, 0, 0, 100, 100, 0.7)});
  EXPECT_DOUBLE_EQ(perfect.map(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.stats[3], 1.0);  // the 20x20 box is small
  EXPECT_DOUBLE_EQ(perfect.stats[5], 1.0);  // the 100x100 box is large
  // Category 1 finds one of its two boxes: precision 1 up to recall 0.5 (51 of 101 points).
  const CocoStats half =
      coco_evaluate(gt, {box("1", 1, 10, 10, 20, 20, 0.9), box("2", 2, 0, 0, 100, 100, 0.7)});
  EXPECT_NEAR(half.map(), (51.0 / 101 + 1.0) / 2, 1e-12);
  EXPECT_NEAR(half.stats[8], (0.5 + 1.0) / 2, 1e-12);  // AR@100
}

TEST(CocoEval, IouThresholdsAndCrowdRegionsFollowCocoEval) {
  // A detection at IoU 0.6 with its box is a match at thresholds .50, .55 and .60 only.
  CocoGroundTruth gt = ground_truth({box("1", 1, 0, 0, 100, 100, 0, 1)});
  gt.category_ids = {1};
  const CocoStats s = coco_evaluate(gt, {box("1", 1, 0, 0, 100, 60, 0.9)});
  EXPECT_NEAR(s.map(), 3.0 / 10, 1e-12);
  EXPECT_DOUBLE_EQ(s.map50(), 1.0);
  EXPECT_DOUBLE_EQ(s.stats[2], 0.0);  // AP75
  // Detections inside a crowd region are ignored, not false positives; a crowd-only category
  // has no ground truth to score (-1).
  CocoBox crowd = box("1", 1, 0, 0, 100, 100, 0, 1);
  crowd.iscrowd = true;
  CocoGroundTruth g2 = ground_truth({crowd, box("2", 1, 0, 0, 50, 50, 0, 2)});
  g2.category_ids = {1};
  const CocoStats c =
      coco_evaluate(g2, {box("1", 1, 10, 10, 30, 30, 0.95), box("2", 1, 0, 0, 50, 50, 0.5)});
  EXPECT_DOUBLE_EQ(c.map(), 1.0);
  g2.annotations = {crowd};
  EXPECT_DOUBLE_EQ(coco_evaluate(g2, {box("1", 1, 10, 10, 30, 30, 0.95)}).map(), -1.0);
}

TEST(CocoEval, GroundTruthAndResultsFilesAreReadAndCheckedWithTheirNames) {
  const fs::path dir = temp_dir("coco_files");
  const std::string gt_path = (dir / "instances_val2017.json").string();
  std::ofstream(gt_path) << R"({"images": [{"id": 7}, {"id": "a"}], "categories": [{"id": 3}],
    "annotations": [{"id": 1, "image_id": 7, "category_id": 3, "bbox": [1, 2, 3, 4],
                     "area": 99, "iscrowd": 0, "segmentation": [[1, 2, 3]]}]})";
  const CocoGroundTruth gt = load_coco_ground_truth(gt_path);
  EXPECT_EQ(gt.image_ids, (std::vector<std::string>{"7", "a"}));
  ASSERT_EQ(gt.annotations.size(), 1u);
  EXPECT_EQ(gt.annotations[0].area, 99);
  const std::string res_path = (dir / "res.json").string();
  std::ofstream(res_path) << R"([{"image_id": 7, "category_id": 3, "bbox": [1, 2, 3, 4]}])";
  try {
    load_coco_results(res_path);
    FAIL() << "a result without a score was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(res_path + ": entry 0: needs a numeric score"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(gt_path) << R"({"images": []})";
  EXPECT_THROW(load_coco_ground_truth(gt_path), std::runtime_error);
  // A malformed polygon is found though polygons are not kept; a wrong shape names the entry.
  std::ofstream(gt_path) << R"({"images": [{"id": 7}], "categories": [{"id": 3}],
    "annotations": [{"image_id": 7, "category_id": 3, "bbox": [1, 2, 3, 4],
                     "segmentation": [[1, 2, 3,]]}]})";
  try {
    load_coco_ground_truth(gt_path);
    FAIL() << "a malformed segmentation was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(gt_path + ":3:48: malformed JSON", 0), 0u) << e.what();
  }
  std::ofstream(gt_path) << R"({"images": [{"id": 7}], "categories": [{"id": 3}],
    "annotations": [{"image_id": 7, "category_id": 3, "bbox": [1, 2, "3", 4]}]})";
  try {
    load_coco_ground_truth(gt_path);
    FAIL() << "a string in a bbox was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), gt_path + ": annotations[0]: bbox values must be numbers");
  }
  // Ids beyond 64 bits are refused as missing, not cast (a cast would be undefined).
  std::ofstream(gt_path) << R"({"images": [{"id": 1e300}], "categories": [], "annotations": []})";
  try {
    load_coco_ground_truth(gt_path);
    FAIL() << "an image id of 1e300 was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), gt_path + ": images[0] has no id");
  }
  fs::remove_all(dir);
}

// Text from files reaches the terminal with its control bytes shown, not obeyed.
TEST(TerminalSafe, ControlBytesAreShownNotSent) {
  EXPECT_EQ(yolo::terminal_safe("a\x1b[2Jb\x07"), "a\\x1b[2Jb\\x07");
  EXPECT_EQ(yolo::terminal_safe("\x7f\r"), "\\x7f\\x0d");
  EXPECT_EQ(yolo::terminal_safe("csi \xc2\x9b"
                                "31m"),
            "csi \\xc2\\x9b31m");  // UTF-8 C1 CSI
  EXPECT_EQ(yolo::terminal_safe("two\nlines\tand caf\xc3\xa9 \xe2\x96\x88"),
            "two\nlines\tand caf\xc3\xa9 \xe2\x96\x88");
  testing::internal::CaptureStderr();
  yolo::log_warn("labels/x.txt:1: '\x1b]0;pwned\x07' is not a number");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_NE(err.find("\\x1b]0;pwned\\x07"), std::string::npos) << err;
}

// File formats other tools read or write: TensorBoard event files, JSON, COCO evaluation.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "utils/core/format.h"
#include "utils/core/json.h"
#include "utils/core/log.h"
#include "utils/core/tb_events.h"
#include "utils/eval/coco_eval.h"

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

TEST(TensorBoard, Crc32cMatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // RFC 3720's check value for CRC-32C
}

TEST(TensorBoard, ScalarsReadBackWithTheirStepsAndEveryRecordChecksummed) {
  const fs::path dir = temp_dir("tb_events");
  std::string path;
  {
    EventWriter w(dir.string());
    path = w.path();
    w.add_scalar("train/box_loss", 0.125f, 0);
    w.add_scalar("metrics/mAP_0.5:0.95", 0.5f, 1);
  }
  EXPECT_NE(fs::path(path).filename().string().find("events.out.tfevents."), std::string::npos);
  const auto recs = read_event_file(path);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].file_version, "brain.Event:2");
  ASSERT_EQ(recs[2].scalars.size(), 1u);
  EXPECT_EQ(recs[2].scalars[0].first, "metrics/mAP_0.5:0.95");
  EXPECT_EQ(recs[2].scalars[0].second, 0.5f);
  EXPECT_EQ(recs[2].step, 1);
  EXPECT_GT(recs[1].wall_time, 1.6e9);
  // A flipped byte in the last payload is caught by its checksum.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-6, std::ios::end);
    f.put('\x7f');
  }
  try {
    read_event_file(path);
    FAIL() << "a corrupted record was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("record 2: bad payload checksum"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Json, ParsesNestingEscapesAndSkipsKeys) {
  const JsonValue v = parse_json(
      R"({"a": [1, -2.5e1, true, null], "s": "x\"\u00e9\n", "seg": [[1,2],[3]], "o": {}})", "t",
      {"seg"});
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.find("seg"), nullptr);
  const JsonValue* a = v.find("a");
  ASSERT_TRUE(a && a->is_array() && a->items.size() == 4);
  EXPECT_EQ(a->items[1].number, -25);
  EXPECT_TRUE(a->items[2].boolean);
  EXPECT_EQ(v.find("s")->str, "x\"\xc3\xa9\n");
  EXPECT_EQ(json_quote("a\"b\n"), "\"a\\\"b\\n\"");
}

TEST(Json, ErrorsNameTheLineAndColumn) {
  try {
    parse_json("{\n  \"a\": [1, 2,,]\n}", "f.json");
    FAIL() << "bad JSON parsed";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "f.json:2:14: unexpected character");
  }
  EXPECT_THROW(parse_json("[1, 2", "f.json"), std::runtime_error);
  EXPECT_THROW(parse_json("{} x", "f.json"), std::runtime_error);
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

// utils/export: the lowering, the TorchScript and ONNX writers, and the files read back the way
// val and detect read them (utils/eval/inference_model).
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "models/yolo.h"
#include "utils/core/paths.h"
#include "utils/eval/inference_model.h"
#include "utils/eval/nms.h"
#include "utils/eval/onnx_info.h"
#include "utils/export/export_graph.h"
#include "utils/export/export_metadata.h"
#include "utils/export/onnx_export.h"
#include "utils/export/torchscript_export.h"

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kNames = {"circle", "rect'angle", "tri\"ang\\le"};

// A model of configs/models/<cfg>.yaml with 3 classes, fused for export, and a scratch folder.
class ModelExportTest : public ::testing::Test {
 protected:
  void build(const std::string& cfg) {
    torch::manual_seed(0);
    model_ = yolo::build_model(yolo::project_root() + "/configs/models/" + cfg + ".yaml", 3);
    model_->eval();
    model_->fuse();
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "yolo_export_test_" + std::to_string(::getpid()) + "_" + test->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / name;
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // The model's rows: (B, N, 5 + nc) with objectness 1 for anchor-free models.
  torch::Tensor rows(const torch::Tensor& x) {
    torch::NoGradGuard no_grad;
    return model_->forward(x).pred;
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  static void expect_close(const torch::Tensor& got, const torch::Tensor& want,
                           double atol = 1e-4) {
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(torch::allclose(got, want, 1e-4, atol))
        << "max difference " << (got - want).abs().max().item<double>();
  }

  // ONNX options for Ultralytics' layout at the description's size, names and metadata.
  static yolo::OnnxOptions ultralytics_onnx(const yolo::ExportDescription& d) {
    yolo::OnnxOptions o;
    o.height = d.height;
    o.width = d.width;
    o.names = d.names;
    o.metadata = yolo::ultralytics_onnx_metadata(d);
    return o;
  }

  yolo::DetectionModel model_{nullptr};
  fs::path dir_;
};

class ExportTest : public ModelExportTest {
 protected:
  void SetUp() override { build("yolov5n"); }
  torch::Tensor expected(const torch::Tensor& x) { return rows(x); }
};

TEST(Float16Bits, EqualTorchsRounding) {
  std::mt19937 rng(1);
  std::vector<float> v = {
      0.0f,          -0.0f,         1.0f,    -2.5f,   65504.0f,
      65520.0f,      1e-8f,         6.0e-8f, 3.0e-5f, std::numeric_limits<float>::infinity(),
      1.0009765625f, 1.00048828125f};
  std::uniform_real_distribution<float> u(-1000.0f, 1000.0f);
  std::uniform_real_distribution<float> small(-1e-4f, 1e-4f);
  for (int i = 0; i < 2000; ++i) v.push_back(i % 2 ? u(rng) : small(rng));
  const torch::Tensor h = torch::tensor(v).to(torch::kHalf).contiguous();
  const auto* bits = reinterpret_cast<const uint16_t*>(h.data_ptr());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(yolo::float16_bits(v[i]), bits[i]) << "value " << v[i];
  }
}

TEST(PythonNames, RoundTripThroughTheDictLiteral) {
  const std::vector<std::string> names = {"person",      "it's",      "say \"hi\"",
                                          "back\\slash", "new\nline", "caf\xc3\xa9"};
  const std::string text = yolo::python_names_dict(names);
  EXPECT_EQ(text.substr(0, 30), "{0: 'person', 1: \"it's\", 2: 's");
  EXPECT_EQ(yolo::parse_python_names(text), names);
  EXPECT_THROW(yolo::parse_python_names("[1, 2]"), std::runtime_error);
  EXPECT_THROW(yolo::parse_python_names("{1: 'a'}"), std::runtime_error);  // keys from 0
}

TEST_F(ExportTest, LoweringRefusesAnUnfusedModel) {
  yolo::DetectionModel raw =
      yolo::build_model(yolo::project_root() + "/configs/models/yolov5n.yaml", 3);
  try {
    yolo::lower_model(*raw);
    FAIL() << "an unfused model was lowered";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("fused"), std::string::npos) << e.what();
  }
}

TEST_F(ExportTest, LoweringCountsTheModelsRows) {
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  EXPECT_EQ(g.head.nc, 3);
  EXPECT_EQ(g.head.inputs.size(), 3u);
  EXPECT_EQ(g.rows(64, 96), expected(torch::rand({1, 3, 64, 96})).size(1));
}

// The scripted module computes the model's predictions at any batch and size, from C++'s loader
// and through InferenceModel with the names of its config.txt.
TEST_F(ExportTest, TorchScriptMatchesTheModelAtAnyShape) {
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  yolo::TorchScriptOptions o;
  o.shape = {1, 3, 64, 64};
  o.names = kNames;
  const std::string path = write("m.torchscript", yolo::torchscript_bytes(g, o));
  torch::jit::Module m = torch::jit::load(path);
  torch::NoGradGuard no_grad;
  for (const auto& shape : {std::vector<int64_t>{1, 3, 64, 64}, {2, 3, 96, 64}}) {
    const torch::Tensor x = torch::rand(shape);
    expect_close(m.forward({x}).toTensor(), expected(x));
  }
  yolo::InferenceModel im(path, {});
  EXPECT_EQ(im.names(), kNames);
  EXPECT_EQ(im.stride(), 32);
  EXPECT_EQ(im.fixed_height(), 0);  // scripted: any size
  const torch::Tensor x = torch::rand({1, 3, 32, 128});
  expect_close(im.predict(x), expected(x));
}

TEST_F(ExportTest, OnnxFileCarriesShapeAndMetadata) {
  if (!yolo::onnx_export_available()) GTEST_SKIP() << "built without the ONNX library";
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  yolo::OnnxOptions o;
  o.batch = 2;
  o.height = 64;
  o.width = 96;
  o.names = kNames;
  yolo::OnnxInfo info = yolo::read_onnx_info(write("fixed.onnx", yolo::onnx_model_bytes(g, o)));
  EXPECT_EQ(info.input_name, "images");
  EXPECT_EQ(info.input_shape, (std::vector<int64_t>{2, 3, 64, 96}));
  EXPECT_EQ(info.input_elem_type, 1);
  EXPECT_EQ(info.metadata.at("stride"), "32");
  EXPECT_EQ(yolo::parse_python_names(info.metadata.at("names")), kNames);

  o.dynamic = true;
  info = yolo::read_onnx_info(write("dynamic.onnx", yolo::onnx_model_bytes(g, o)));
  EXPECT_EQ(info.input_shape, (std::vector<int64_t>{0, 3, 0, 0}));
  for (int opset = yolo::kMinOnnxOpset; opset <= yolo::kMaxOnnxOpset; ++opset) {
    o.opset = opset;
    EXPECT_NO_THROW(yolo::onnx_model_bytes(g, o)) << "opset " << opset;  // checked inside
  }
  o.dynamic = false;
  o.opset = 12;
  o.half = true;
  info = yolo::read_onnx_info(write("half.onnx", yolo::onnx_model_bytes(g, o)));
  EXPECT_EQ(info.input_elem_type, 10);
}

// The fixed-size file run by OpenCV's dnn module, as val and detect run it: the model's numbers,
// any batch (in chunks of the file's), and a clear error for another image size.
TEST_F(ExportTest, OnnxRunsInOpenCvDnnAsTheModel) {
  if (!yolo::onnx_export_available()) GTEST_SKIP() << "built without the ONNX library";
  if (!yolo::onnx_runtime_available()) GTEST_SKIP() << "built without OpenCV's dnn module";
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  yolo::OnnxOptions o;
  o.height = 64;
  o.width = 96;
  o.names = kNames;
  for (const int64_t batch : {1, 4}) {  // batch 4: OpenCV 4.6 broadcasts batch-1 constants wrong
    o.batch = batch;
    const std::string path =
        write("b" + std::to_string(batch) + ".onnx", yolo::onnx_model_bytes(g, o));
    yolo::InferenceModel im(path, {});
    EXPECT_EQ(im.names(), kNames);
    EXPECT_EQ(im.fixed_height(), 64);
    EXPECT_EQ(im.fixed_width(), 96);
    const torch::Tensor x = torch::rand({5, 3, 64, 96});  // in chunks, the last one padded
    expect_close(im.predict(x), expected(x));
  }
  o.batch = 1;
  yolo::InferenceModel im(write("best.onnx", yolo::onnx_model_bytes(g, o)), {});
  try {
    im.predict(torch::rand({1, 3, 64, 64}));
    FAIL() << "another size ran";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("64x96"), std::string::npos) << e.what();
  }
}

TEST_F(ExportTest, NoModelIsRefusedNamingTheFile) {
  for (const auto& [name, bytes] :
       {std::pair<std::string, std::string>{"junk.onnx", "definitely not protobuf \xff\xff\xff"},
        {"junk.torchscript", "PK not a zip"}}) {
    const std::string path = write(name, bytes);
    try {
      yolo::InferenceModel im(path, {});
      FAIL() << "junk loaded: " << path;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// Ultralytics' anchor-free models (C2f, C3k2, C2PSA's attention, the DFL head) written in
// Ultralytics' layout (B, 4 + nc, N) with its metadata, and read back by val and detect's loader.
class AnchorFreeExportTest : public ModelExportTest,
                             public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override { build(GetParam()); }

  // Ultralytics' channels-first form of the model's rows.
  torch::Tensor channels_first(const torch::Tensor& x) {
    const torch::Tensor y = rows(x);
    return torch::cat({y.slice(2, 0, 4), y.slice(2, 5)}, 2).transpose(1, 2);
  }
  static void expect_close(const torch::Tensor& got, const torch::Tensor& want) {
    ModelExportTest::expect_close(got, want, 1e-3);
  }
  yolo::ExportDescription description() const {
    yolo::ExportDescription d;
    d.model = GetParam();
    d.names = kNames;
    d.height = 64;
    d.width = 96;
    return d;
  }
};

TEST_P(AnchorFreeExportTest, TorchScriptMatchesTheModelAtAnyShape) {
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  EXPECT_TRUE(g.head.anchor_free);
  EXPECT_EQ(g.rows(64, 96), rows(torch::rand({1, 3, 64, 96})).size(1));
  yolo::TorchScriptOptions o;
  o.names = kNames;
  o.config_json = yolo::ultralytics_config_json(description());
  const std::string path = write("m.torchscript", yolo::torchscript_bytes(g, o));
  torch::jit::Module m = torch::jit::load(path);
  torch::NoGradGuard no_grad;
  for (const auto& shape : {std::vector<int64_t>{1, 3, 64, 64}, {2, 3, 96, 64}}) {
    const torch::Tensor x = torch::rand(shape);
    expect_close(m.forward({x}).toTensor(), channels_first(x));
  }
  yolo::InferenceModel im(path, {});  // Ultralytics' config.txt: names by string keys
  EXPECT_EQ(im.names(), kNames);
  EXPECT_EQ(im.stride(), 32);
  const torch::Tensor x = torch::rand({1, 3, 32, 128});
  expect_close(im.predict(x), rows(x));
}

TEST_P(AnchorFreeExportTest, OnnxRunsInOpenCvDnnAsTheModel) {
  if (!yolo::onnx_export_available()) GTEST_SKIP() << "built without the ONNX library";
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  yolo::OnnxOptions o = ultralytics_onnx(description());
  const yolo::OnnxInfo info = yolo::read_onnx_info(write("m.onnx", yolo::onnx_model_bytes(g, o)));
  EXPECT_EQ(info.metadata.at("task"), "detect");
  EXPECT_EQ(info.metadata.at("imgsz"), "[64, 96]");
  EXPECT_EQ(yolo::parse_python_names(info.metadata.at("names")), kNames);
  o.dynamic = true;
  for (int opset = yolo::kMinOnnxOpset; opset <= yolo::kMaxOnnxOpset; ++opset) {
    o.opset = opset;
    EXPECT_NO_THROW(yolo::onnx_model_bytes(g, o)) << "opset " << opset;  // checked inside
  }
  if (!yolo::onnx_runtime_available()) GTEST_SKIP() << "built without OpenCV's dnn module";
  o.dynamic = false;
  o.opset = 12;
  for (const int64_t batch : {1, 2}) {
    o.batch = batch;
    yolo::InferenceModel im(
        write("b" + std::to_string(batch) + ".onnx", yolo::onnx_model_bytes(g, o)), {});
    EXPECT_EQ(im.names(), kNames);
    const torch::Tensor x = torch::rand({3, 3, 64, 96});
    expect_close(im.predict(x), rows(x));
  }
}

// Another task's file (Ultralytics' segment export) is refused by name, as ONNX or TorchScript.
TEST_P(AnchorFreeExportTest, AnotherTasksFileIsRefused) {
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  std::vector<std::string> paths;
  yolo::TorchScriptOptions t;
  t.names = kNames;
  t.config_json = yolo::ultralytics_config_json(description());
  const std::string detect_task = "\"task\": \"detect\"";
  const size_t at = t.config_json.find(detect_task);
  ASSERT_NE(at, std::string::npos) << t.config_json;
  t.config_json.replace(at, detect_task.size(), "\"task\": \"segment\"");
  paths.push_back(write("seg.torchscript", yolo::torchscript_bytes(g, t)));
  if (yolo::onnx_export_available()) {
    yolo::OnnxOptions o;
    o.height = o.width = 64;
    o.names = kNames;
    o.metadata = {{"task", "segment"}};
    paths.push_back(write("seg.onnx", yolo::onnx_model_bytes(g, o)));
  }
  for (const std::string& path : paths) {
    try {
      yolo::InferenceModel im(path, {});
      FAIL() << "a segment model loaded: " << path;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'segment' model"), std::string::npos) << what;
      EXPECT_EQ(what.find("config.txt is not"), std::string::npos) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, AnchorFreeExportTest,
                         ::testing::Values("yolov8n", "yolo11n", "yolo26n"));

}  // namespace

// YOLO26 exported end to end: the one-to-one head and its top-k in the file, (B, k, 6) rows that
// equal the top-k detections of the model's own one-to-one output, read back by val and detect
// as end-to-end predictions.
class End2EndExportTest : public ModelExportTest {
 protected:
  void SetUp() override {
    build("yolo26n");
    model_->head().select_for_inference(true);
    // BatchNorm statistics away from 0/1, so that scores differ from anchor to anchor (ties
    // would leave the top-k's order to each kernel).
    torch::NoGradGuard no_grad;
    torch::manual_seed(1);
    for (auto& kv : model_->named_parameters()) {
      kv.value().add_(torch::randn_like(kv.value()) * 0.05);
      // Class logits raised from their initial 1 % prior, so that scores spread over 0.01..1.
      const std::string& k = kv.key();
      if (k.find("one2one_cv3") != std::string::npos && k.size() > 7 &&
          k.compare(k.size() - 7, 7, ".2.bias") == 0) {
        kv.value().add_(3.0);
      }
    }
  }
  // Rows of (n, 6) detections found among `got`'s within atol, whatever their order: scores that
  // differ by float rounding may swap places, and the last rows change where they tie at the k-th.
  static void expect_same_rows(const torch::Tensor& got, const torch::Tensor& want, int slack) {
    ASSERT_EQ(got.size(1), want.size(1));
    const torch::Tensor d =
        (got.unsqueeze(0) - want.unsqueeze(1)).abs() / (want.unsqueeze(1).abs() + 1);  // (n, m, 6)
    const int64_t found =
        (std::get<0>(d.amax(2).min(1)) <= 1e-4).sum().item<int64_t>();  // want rows found
    EXPECT_GE(found, want.size(0) - slack) << "of " << want.size(0) << " rows";
    EXPECT_LE(std::abs(got.size(0) - want.size(0)), slack);
  }
  // The model's detections by the top-k of its one-to-one rows, with no confidence filter.
  std::vector<torch::Tensor> detections(const torch::Tensor& x) {
    yolo::NmsOptions o;
    o.end2end = true;
    o.conf_thres = 0.0;
    return yolo::topk_detections(rows(x), o);
  }
  static yolo::NmsOptions nms_e2e() {
    yolo::NmsOptions o;
    o.end2end = true;
    o.conf_thres = 0.0;
    return o;
  }
  yolo::ExportDescription description() const {
    yolo::ExportDescription d;
    d.model = "yolo26n";
    d.names = kNames;
    d.height = 64;
    d.width = 96;
    d.end2end = true;
    return d;
  }
};

TEST_F(End2EndExportTest, TorchScriptGivesTheOneToOneTopkAndReadsBack) {
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  ASSERT_TRUE(g.head.end2end);
  EXPECT_EQ(g.head.box.size(), 3u);
  yolo::TorchScriptOptions o;
  o.names = kNames;
  o.config_json = yolo::ultralytics_config_json(description());
  EXPECT_NE(o.config_json.find("\"end2end\": true"), std::string::npos) << o.config_json;
  const std::string path = write("e2e.torchscript", yolo::torchscript_bytes(g, o));
  torch::jit::Module m = torch::jit::load(path);
  torch::NoGradGuard no_grad;
  for (const auto& shape : {std::vector<int64_t>{1, 3, 64, 96}, {2, 3, 96, 64}, {1, 3, 32, 32}}) {
    const torch::Tensor x = torch::rand(shape);
    const torch::Tensor y = m.forward({x}).toTensor();
    const int64_t n = g.rows(shape[2], shape[3]), k = std::min<int64_t>(300, n);
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{shape[0], k, 6}));
    const auto want = detections(x);
    for (int64_t i = 0; i < shape[0]; ++i) expect_same_rows(y[i], want[i], 2);
  }
  yolo::InferenceModel im(path, {});
  EXPECT_TRUE(im.end2end());
  const torch::Tensor x = torch::rand({2, 3, 64, 64});
  yolo::NmsOptions nms = nms_e2e();
  nms.conf_thres = 0.01;
  const auto got = yolo::non_max_suppression(im.predict(x), nms);
  const auto want = yolo::non_max_suppression(rows(x), nms);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_GT(want[i].size(0), 10);
    expect_same_rows(got[i], want[i], 2);
  }
  // A one-to-many file is not end to end, and --end2end on it is refused by name.
  model_->head().select_for_inference(false);
  yolo::TorchScriptOptions plain;
  plain.names = kNames;
  plain.config_json = yolo::ultralytics_config_json({"yolo26n", kNames});
  const std::string o2m =
      write("o2m.torchscript", yolo::torchscript_bytes(yolo::lower_model(*model_), plain));
  EXPECT_FALSE(yolo::InferenceModel(o2m, {}).end2end());
  yolo::InferenceOptions io;
  io.end2end = true;
  try {
    yolo::InferenceModel bad(o2m, io);
    FAIL() << "--end2end accepted for a one-to-many file";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("export the .pt with --end2end"), std::string::npos)
        << e.what();
  }
}

TEST_F(End2EndExportTest, OnnxHoldsTheTopkAndNamesWhatOpenCvLacks) {
  if (!yolo::onnx_export_available()) GTEST_SKIP() << "built without the ONNX library";
  const yolo::ExportGraph g = yolo::lower_model(*model_);
  yolo::OnnxOptions o = ultralytics_onnx(description());
  const std::string path = write("e2e.onnx", yolo::onnx_model_bytes(g, o));
  const yolo::OnnxInfo info = yolo::read_onnx_info(path);
  EXPECT_EQ(info.metadata.at("end2end"), "True");
  for (int opset = yolo::kMinOnnxOpset; opset <= yolo::kMaxOnnxOpset; ++opset) {
    o.opset = opset;
    for (const bool dynamic : {false, true}) {
      o.dynamic = dynamic;
      EXPECT_NO_THROW(yolo::onnx_model_bytes(g, o)) << "opset " << opset;  // checked inside
    }
  }
  if (!yolo::onnx_runtime_available()) GTEST_SKIP() << "built without OpenCV's dnn module";
  try {
    yolo::InferenceModel im(path, {});
    // A newer OpenCV runs TopK: then the detections must be the model's.
    const torch::Tensor x = torch::rand({1, 3, 64, 96});
    const torch::Tensor got = yolo::non_max_suppression(im.predict(x), nms_e2e())[0];
    expect_same_rows(got, detections(x)[0], 2);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("TopK"), std::string::npos) << what;
    EXPECT_NE(what.find(".torchscript"), std::string::npos) << what;
  }
}

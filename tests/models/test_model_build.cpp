#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "models/anchor_free_detect.h"
#include "models/common.h"
#include "models/weights.h"
#include "models/yolo.h"
#include "utils/core/paths.h"

using yolo::DetectionModel;

namespace {
std::string cfg(const std::string& name) {
  return yolo::project_root() + "/configs/models/" + name + ".yaml";
}

std::string error_of(const std::string& yaml) {
  try {
    DetectionModel m(yolo::parse_model_spec_string(yaml, "bad.yaml"));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

const char* kTiny = R"(
nc: 2
depth_multiple: 0.33
width_multiple: 0.125
anchors:
  - [10,13, 16,30, 33,23]
  - [30,61, 62,45, 59,119]
backbone:
  [[-1, 1, Conv, [64, 6, 2, 2]],
   [-1, 1, Conv, [128, 3, 2]],
   [-1, 3, C3, [128]],
   [-1, 1, Conv, [256, 3, 2]],
   [-1, 1, SPPF, [256, 5]],
  ]
head:
  [[-1, 1, nn.Upsample, [None, 2, 'nearest']],
   [[-1, 2], 1, Concat, [1]],
   [-1, 1, C3, [128, False]],
   [[7, 4], 1, Detect, [nc, anchors]],
  ]
)";
}  // namespace

struct SizeCase {
  const char* name;
  int64_t params;
  size_t entries;
};

void PrintTo(const SizeCase& c, std::ostream* os) { *os << c.name; }

class ModelSizes : public ::testing::TestWithParam<SizeCase> {};

// YOLOv5 v7.0 figures with nc=80 (../shared/PLATFORM-NOTES.md).
TEST_P(ModelSizes, ParameterCountsAndStateDictMatchYolov5) {
  const SizeCase c = GetParam();
  DetectionModel m = yolo::build_model(cfg(c.name));
  EXPECT_EQ(m->num_parameters(), c.params);
  const auto params = m->named_parameters();
  const auto buffers = m->named_buffers();
  EXPECT_EQ(params.size() + buffers.size(), c.entries);
  EXPECT_EQ(params.keys().front(), "model.0.conv.weight");
  EXPECT_EQ(params.keys().back(), "model.24.m.2.bias");
  EXPECT_NE(buffers.find("model.24.anchors"), nullptr);
  EXPECT_NE(buffers.find("model.0.bn.running_mean"), nullptr);
  EXPECT_NE(buffers.find("model.0.bn.num_batches_tracked"), nullptr);
  EXPECT_EQ(m->strides(), (std::vector<int>{8, 16, 32}));
}

INSTANTIATE_TEST_SUITE_P(Yolov5, ModelSizes,
                         ::testing::Values(SizeCase{"yolov5n", 1872157, 349},
                                           SizeCase{"yolov5s", 7235389, 349},
                                           SizeCase{"yolov5m", 21190557, 481},
                                           SizeCase{"yolov5l", 46563709, 613},
                                           SizeCase{"yolov5x", 86749405, 745}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Model, YolovNamesMatchYolov5Keys) {
  DetectionModel m = yolo::build_model(cfg("yolov5n"));
  const auto params = m->named_parameters();
  for (const char* key :
       {"model.2.m.0.cv1.conv.weight", "model.2.cv3.bn.bias", "model.9.cv2.conv.weight",
        "model.13.m.0.cv2.bn.weight", "model.24.m.0.weight", "model.24.m.1.bias"}) {
    EXPECT_NE(params.find(key), nullptr) << key;
  }
  // BatchNorm settings as YOLOv5's initialize_weights.
  auto bn = m->model[0]->as<yolo::Conv>()->norm();
  auto* bn2d = dynamic_cast<torch::nn::BatchNorm2dImpl*>(bn.get());
  ASSERT_NE(bn2d, nullptr);
  EXPECT_DOUBLE_EQ(bn2d->options.eps(), 1e-3);
  EXPECT_DOUBLE_EQ(bn2d->options.momentum().value(), 0.03);
}

TEST(Model, TrainingAndEvalOutputShapes) {
  DetectionModel m = yolo::build_model(cfg("yolov5n"), /*nc=*/3);
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({2, 3, 64, 96});
  m->train();
  const auto out = m->forward(x);
  ASSERT_EQ(out.raw.size(), 3u);
  EXPECT_EQ(out.raw[0].sizes(), (std::vector<int64_t>{2, 3, 8, 12, 8}));
  EXPECT_EQ(out.raw[1].sizes(), (std::vector<int64_t>{2, 3, 4, 6, 8}));
  EXPECT_EQ(out.raw[2].sizes(), (std::vector<int64_t>{2, 3, 2, 3, 8}));
  EXPECT_FALSE(out.pred.defined());
  m->eval();
  const auto ev = m->forward(x);
  EXPECT_EQ(ev.pred.sizes(), (std::vector<int64_t>{2, 3 * (96 + 24 + 6), 8}));
  // Decoded centres lie inside (or near) the image; scores are probabilities.
  EXPECT_GE(ev.pred.select(2, 4).min().item<float>(), 0.f);
  EXPECT_LE(ev.pred.select(2, 4).max().item<float>(), 1.f);
}

TEST(Model, DecodeMatchesYolov5Formula) {
  DetectionModel m = yolo::build_model(cfg("yolov5n"), 1);
  m->eval();
  torch::NoGradGuard no_grad;
  const auto out = m->forward(torch::rand({1, 3, 64, 64}));
  // Level 0, anchor 1, cell (y=2, x=5): xy = (2*sig - 0.5 + grid) * stride, wh = (2*sig)^2 *
  // anchor.
  const torch::Tensor r = out.raw[0][0][1][2][5].sigmoid();
  const float stride = 8;
  const float ax = 16, ay = 30;  // second P3 anchor in pixels
  const int index = 1 * 8 * 8 + 2 * 8 + 5;
  const torch::Tensor p = out.pred[0][index];
  EXPECT_NEAR(p[0].item<float>(), (r[0].item<float>() * 2 - 0.5f + 5) * stride, 1e-4);
  EXPECT_NEAR(p[1].item<float>(), (r[1].item<float>() * 2 - 0.5f + 2) * stride, 1e-4);
  EXPECT_NEAR(p[2].item<float>(), std::pow(r[2].item<float>() * 2, 2) * ax, 1e-3);
  EXPECT_NEAR(p[3].item<float>(), std::pow(r[3].item<float>() * 2, 2) * ay, 1e-3);
}

TEST(Model, AnchorsInStrideUnitsAndBiasPriors) {
  DetectionModel m = yolo::build_model(cfg("yolov5s"), 80);
  const torch::Tensor a = m->detect()->anchors;
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_NEAR(a[0][0][0].item<float>(), 10.f / 8, 1e-6);
  EXPECT_NEAR(a[2][2][1].item<float>(), 326.f / 32, 1e-6);
  auto conv = m->detect()->m[0]->as<torch::nn::Conv2d>();
  const torch::Tensor b = conv->bias.view({3, -1});
  // The conv's default init adds a uniform term bounded by 1/sqrt(fan_in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(conv->weight.size(1)));
  EXPECT_NEAR(b[0][4].item<double>(), std::log(8.0 / std::pow(640.0 / 8, 2)), bound + 1e-6);
  EXPECT_NEAR(b[0][5].item<double>(), std::log(0.6 / (80 - 0.99999)), bound + 1e-6);
}

TEST(Model, NcOverrideAndScaledTinyModel) {
  DetectionModel m(yolo::parse_model_spec_string(kTiny, "tiny.yaml"), 5);
  EXPECT_EQ(m->nc(), 5);
  EXPECT_EQ(m->strides(), (std::vector<int>{4, 8}));
  m->train();
  const auto out = m->forward(torch::rand({1, 3, 32, 32}));
  ASSERT_EQ(out.raw.size(), 2u);
  EXPECT_EQ(out.raw[0].sizes(), (std::vector<int64_t>{1, 3, 8, 8, 10}));
  EXPECT_NE(m->summary().find("Model summary"), std::string::npos);
}

TEST(Model, ConfigErrorsNameFileAndLine) {
  std::string e =
      error_of(std::string(kTiny).replace(std::string(kTiny).find("SPPF"), 4, "MixConv2d"));
  EXPECT_NE(e.find("bad.yaml:13"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown module 'MixConv2d'"), std::string::npos) << e;
  e = error_of(std::string(kTiny).replace(std::string(kTiny).find("[64, 6, 2, 2]"), 13,
                                          "[64, 6, 2, 2, 1, 1, True, 9]"));
  EXPECT_NE(e.find("bad.yaml:9"), std::string::npos) << e;
  EXPECT_NE(e.find("arguments"), std::string::npos) << e;
  e = error_of(std::string(kTiny).replace(std::string(kTiny).find("[-1, 2]"), 7, "[-1, 9]"));
  EXPECT_NE(e.find("earlier layer"), std::string::npos) << e;
  // Without `anchors:` the YAML is an anchor-free one; YOLOv5's Detect says what it misses.
  e = error_of(
      "nc: 2\ndepth_multiple: 1\nwidth_multiple: 1\nbackbone:\n  [[-1, 1, Conv, [8, 3, 2]]]\n"
      "head:\n  [[[0], 1, Detect, [nc, anchors]]]\n");
  EXPECT_NE(e.find("bad.yaml:7: Detect [nc, anchors] needs 'anchors:'"), std::string::npos) << e;
  e = error_of("nc: [\n");
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
  e = error_of(std::string(kTiny).replace(std::string(kTiny).find("[128]"), 5, "[big]"));
  EXPECT_NE(e.find("integer"), std::string::npos) << e;
}

TEST(Model, ActivationIsReadAsYolov5WritesIt) {
  using Kind = yolo::Activation::Kind;
  EXPECT_EQ(yolo::Activation::parse("nn.LeakyReLU(0.1)").kind, Kind::kLeakyReLU);
  EXPECT_DOUBLE_EQ(yolo::Activation::parse("nn.LeakyReLU(0.1)").alpha, 0.1);
  EXPECT_DOUBLE_EQ(yolo::Activation::parse("torch.nn.LeakyReLU()").alpha, 0.01);
  EXPECT_DOUBLE_EQ(yolo::Activation::parse("nn.LeakyReLU(negative_slope=0.2, inplace=True)").alpha,
                   0.2);
  EXPECT_EQ(yolo::Activation::parse(" nn.ReLU() ").kind, Kind::kReLU);
  EXPECT_EQ(yolo::Activation::parse("nn.SiLU(inplace=True)").kind, Kind::kSiLU);
  EXPECT_EQ(yolo::Activation::parse("nn.Hardswish()").kind, Kind::kHardswish);
  EXPECT_EQ(yolo::Activation::parse("nn.LeakyReLU(0.1)").text(), "nn.LeakyReLU(0.1)");
  for (const char* bad : {"nn.PReLU()", "nn.ReLU(3)", "nn.LeakyReLU(a)", "lambda x: x", "ReLU",
                          "nn.LeakyReLU(0.1, 0.2)"}) {
    EXPECT_THROW(yolo::Activation::parse(bad), std::invalid_argument) << bad;
  }
}

TEST(Model, ActivationAppliesToConvBlocksOfThatModelOnly) {
  const std::string yaml = std::string(kTiny) + "activation: nn.ReLU()\n";
  DetectionModel relu(yolo::parse_model_spec_string(yaml, "relu.yaml"));
  DetectionModel silu(yolo::parse_model_spec_string(kTiny, "tiny.yaml"));
  int convs = 0;
  yolo::for_each_conv(*relu, [&](yolo::ConvImpl& c) {
    ++convs;
    EXPECT_EQ(c.activation().kind, yolo::Activation::Kind::kReLU);
  });
  EXPECT_GT(convs, 5);
  yolo::for_each_conv(*silu, [](yolo::ConvImpl& c) {
    EXPECT_EQ(c.activation().kind, yolo::Activation::Kind::kSiLU);
  });
  relu->eval();
  const auto first = relu->model->ptr(0)->as<yolo::ConvImpl>();
  EXPECT_GE(first->forward(torch::randn({1, 3, 32, 32})).min().item<float>(), 0.f);
  const std::string e = error_of(std::string(kTiny) + "activation: nn.Swish()\n");
  EXPECT_NE(e.find("bad.yaml:21: activation: 'nn.Swish()'"), std::string::npos) << e;
}

TEST(Model, AnchorCountBuildsPlaceholdersPerLevel) {
  std::string yaml(kTiny);
  const size_t a = yaml.find("anchors:\n"), b = yaml.find("backbone:");
  yaml.replace(a, b - a, "anchors: 4\n");
  DetectionModel m(yolo::parse_model_spec_string(yaml, "four.yaml"));
  EXPECT_EQ(m->detect()->anchors.sizes(), (std::vector<int64_t>{2, 4, 2}));
  EXPECT_EQ(m->detect()->m[0]->as<torch::nn::Conv2d>()->weight.size(0), 4 * (2 + 5));
  // YOLOv5's placeholders 0..7 in pixels, in stride units.
  EXPECT_FLOAT_EQ(m->detect()->anchors[1][3][1].item<float>(), 7.f / 8);
  yaml.replace(yaml.find("anchors: 4"), 10, "anchors: 0");
  EXPECT_NE(error_of(yaml).find("count of anchors per level from 1 to 16"), std::string::npos);
}

TEST(Model, ListArgumentsAndTorchLayers) {
  std::string yaml(kTiny);
  yaml.replace(yaml.find("[-1, 1, SPPF, [256, 5]]"), 23,
               "[-1, 1, SPP, [256, [3, 5]]],\n   [-1, 1, nn.MaxPool2d, [3, 1, 1]]");
  yaml.replace(yaml.find("[[7, 4], 1, Detect"), 7, "[[8, 5]");
  DetectionModel m(yolo::parse_model_spec_string(yaml, "spp.yaml"));
  EXPECT_EQ(m->model->ptr(4)->as<yolo::SPPImpl>()->m->size(), 2u);
  yaml.replace(yaml.find("[3, 5]"), 6, "[3, x]");
  EXPECT_NE(error_of(yaml).find("must be a list of integers, got '[3, x]'"), std::string::npos);
}

TEST(Model, FusedAndUnfusedOutputsAgree) {
  DetectionModel m = yolo::build_model(cfg("yolov5n"), 4);
  // Non-trivial BatchNorm statistics, so fusion has something to fold.
  {
    torch::NoGradGuard no_grad;
    for (const auto& b : m->named_buffers()) {
      if (b.key().find("running_mean") != std::string::npos) b.value().uniform_(-0.2, 0.2);
      if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 1.5);
    }
    for (const auto& p : m->named_parameters()) {
      if (p.key().find(".bn.") != std::string::npos) p.value().uniform_(0.5, 1.5);
    }
  }
  m->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({2, 3, 64, 64});
  const torch::Tensor before = m->forward(x).pred;
  const size_t entries_before = m->named_parameters().size();
  m->fuse();
  const torch::Tensor after = m->forward(x).pred;
  EXPECT_LT(m->named_parameters().size(), entries_before);
  EXPECT_TRUE(torch::allclose(before, after, 1e-4, 1e-4))
      << "max diff " << (before - after).abs().max().item<float>();
}

// Channels-last keeps every name, shape and value, so checkpoints and YOLOv5 weights are the
// same; the outputs and gradients agree with NCHW's to float rounding.
TEST(Model, ChannelsLastKeepsValuesAndAgreesWithNchw) {
  torch::manual_seed(0);
  DetectionModel a = yolo::build_model(cfg("yolov5n"), 3);
  DetectionModel b = yolo::build_model(cfg("yolov5n"), 3);
  yolo::load_state_dict(*b, yolo::state_dict(*a));
  const at::Tensor w = b->named_parameters()["model.0.conv.weight"];
  const void* storage_owner = w.unsafeGetTensorImpl();
  yolo::to_channels_last(*b);
  const at::Tensor w2 = b->named_parameters()["model.0.conv.weight"];
  EXPECT_EQ(w2.unsafeGetTensorImpl(), storage_owner);  // the same parameter, for the optimizer
  EXPECT_TRUE(w2.is_contiguous(at::MemoryFormat::ChannelsLast));
  const auto sa = yolo::state_dict(*a), sb = yolo::state_dict(*b);
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [k, t] : sa) EXPECT_TRUE(torch::equal(t, sb.at(k))) << k;
  const at::Tensor x = torch::rand({2, 3, 64, 64});
  const auto pa = a->forward_raw(x), pb = b->forward_raw(x);
  at::Tensor la = torch::zeros({}), lb = torch::zeros({});
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-4, 1e-4)) << "level " << i;
    la = la + pa[i].square().mean();
    lb = lb + pb[i].square().mean();
  }
  la.backward();
  lb.backward();
  const at::Tensor ga = a->named_parameters()["model.2.cv1.conv.weight"].grad();
  const at::Tensor gb = b->named_parameters()["model.2.cv1.conv.weight"].grad();
  EXPECT_TRUE(gb.is_contiguous(at::MemoryFormat::ChannelsLast));
  // Summation orders differ (and with them oneDNN's kernels per CPU family), so compare the whole
  // gradient, not each element's rounding: a layout mistake is off by far more than 5e-4.
  EXPECT_LT(((ga - gb).norm() / ga.norm()).item<double>(), 5e-4)
      << (ga - gb).abs().max().item<double>() << " of " << ga.abs().max().item<double>();
}

// Ultralytics' anchor-free families: one YAML, the scale letter from the file name.
TEST(AnchorFree, ScaledNameBuildsThatScale) {
  const std::string path = yolo::resolve_config("yolo11s", yolo::ConfigKind::kModel, "--cfg");
  EXPECT_EQ(std::filesystem::path(path).filename(), "yolo11s.yaml");  // as named, not yolo11.yaml
  DetectionModel s = yolo::build_model(path);
  EXPECT_EQ(s->spec().scale, "s");
  EXPECT_EQ(s->num_parameters(), 9458752);  // Ultralytics' YOLO11s at nc=80
  // The text a checkpoint keeps rebuilds the same scale without the file name.
  const std::string text = yolo::read_model_yaml(path);
  EXPECT_EQ(yolo::parse_model_spec_string(text, "ckpt").scale, "s");
  // m, l and x switch every C3k2 to C3k blocks, as Ultralytics does.
  EXPECT_EQ(yolo::build_model(cfg("yolo11m"))->num_parameters(), 20114688);
  EXPECT_EQ(yolo::build_model(cfg("yolov8n"))->num_parameters(), 3157200);
}

TEST(AnchorFree, OutputsAndDecodeLayout) {
  DetectionModel m = yolo::build_model(cfg("yolo11n"), 3);
  EXPECT_EQ(m->strides(), (std::vector<int>{8, 16, 32}));
  EXPECT_TRUE(m->detect().is_empty());  // no YOLOv5 head, no anchors
  const auto raw = m->forward_raw(torch::rand({2, 3, 64, 96}));
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw[0].sizes(), (std::vector<int64_t>{2, 64 + 3, 8, 12}));
  m->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor y = m->forward(torch::rand({2, 3, 64, 96})).pred;
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 8 * 12 + 4 * 6 + 2 * 3, 5 + 3}));
  EXPECT_TRUE(torch::all(y.select(2, 4) == 1).item<bool>());  // no objectness: 1
  // The DFL projection is frozen (Ultralytics trains it not either).
  for (const auto& kv : m->named_parameters()) {
    if (kv.key().find(".dfl.") != std::string::npos) {
      EXPECT_FALSE(kv.value().requires_grad()) << kv.key();
    }
  }
}

TEST(AnchorFree, BadYamlsNameFileAndWhatIsSupported) {
  const std::string head = "nc: 2\nscales:\n  n: [0.5, 0.25, 1024]\nbackbone:\n";
  EXPECT_NE(error_of(head + "  - [-1, 1, Conv, [64, 3, 2]]\n  - [-1, 1, C2PSA, [128]]\nhead:\n"
                            "  - [[1], 1, Detect, [nc]]\n")
                .find("bad.yaml:6: C2PSA needs as many output channels as input"),
            std::string::npos);
  EXPECT_NE(error_of(head + "  - [-1, 1, Conv, [64, 3, 2]]\nhead:\n"
                            "  - [[0], 1, Detect, [nc, anchors]]\n")
                .find("bad.yaml:7: Detect [nc, anchors] needs 'anchors:'"),
            std::string::npos);
  const std::string no_scale =
      "nc: 2\nscale: x\nscales:\n  n: [0.5, 0.25, 1024]\nbackbone:\n  - [-1, 1, Conv, [8, 3, 2]]\n"
      "head:\n  - [[0], 1, Detect, [nc]]\n";
  EXPECT_NE(error_of(no_scale).find("scale 'x' is not in 'scales' (it has n)"), std::string::npos);
}

// YOLO26: distances without DFL bins, the residual SPPF with a linear cv1, and a one-to-one copy
// of the head's branches that starts from the same values and biases.
TEST(AnchorFree, Yolo26HasBothHeadsAndItsSppf) {
  DetectionModel m = yolo::build_model(cfg("yolo26n"));
  EXPECT_EQ(m->num_parameters(), 2572280);  // Ultralytics' YOLO26n at nc=80
  EXPECT_EQ(yolo::build_model(cfg("yolo26m"))->num_parameters(), 21896248);
  auto* head = dynamic_cast<yolo::AnchorFreeDetectImpl*>(m->head_module().get());
  ASSERT_NE(head, nullptr);
  ASSERT_TRUE(head->has_one2one());
  EXPECT_EQ(head->reg_max, 1);
  EXPECT_TRUE(head->dfl.is_empty());
  const auto params = m->named_parameters();
  for (const auto& kv : params) {
    const std::string& k = kv.key();
    const auto at = k.find(".one2one_");
    if (at == std::string::npos) continue;
    const std::string twin = k.substr(0, at) + "." + k.substr(at + 9);
    ASSERT_TRUE(params.contains(twin)) << k;
    EXPECT_TRUE(torch::equal(kv.value(), params[twin])) << k;
  }
  const float cls_bias = params["model.23.one2one_cv3.0.2.bias"][0].item<float>();
  EXPECT_NEAR(cls_bias, std::log(5.0 / 80 / std::pow(640.0 / 8, 2)), 1e-5);
  // SPPF [1024, 5, 3, True]: a linear cv1 and a residual; YOLO11's [1024, 5] activates cv1.
  const auto sppf = std::dynamic_pointer_cast<yolo::SPPFImpl>(m->model[9]);
  ASSERT_NE(sppf, nullptr);
  EXPECT_TRUE(sppf->residual());
  EXPECT_FALSE(sppf->cv1->act());
  DetectionModel m11 = yolo::build_model(cfg("yolo11n"));
  const auto sppf11 = std::dynamic_pointer_cast<yolo::SPPFImpl>(m11->model[9]);
  ASSERT_NE(sppf11, nullptr);
  EXPECT_FALSE(sppf11->residual());
  EXPECT_TRUE(sppf11->cv1->act());
  // Both heads run by default, one-to-many levels first; either alone when selected.
  using Heads = yolo::AnchorFreeDetectImpl::Heads;
  EXPECT_EQ(head->selected(), Heads::kBoth);
  const torch::Tensor x = torch::rand({1, 3, 64, 64});
  {
    torch::NoGradGuard no_grad;
    m->eval();
    params["model.23.one2one_cv3.0.2.bias"].add_(1.0);  // trained apart, the heads differ
    const auto both = m->forward_raw(x);
    ASSERT_EQ(both.size(), 6u);
    head->select(Heads::kOne2Many);
    const auto o2m = m->forward_raw(x);
    head->select(Heads::kOne2One);
    const auto o2o = m->forward_raw(x);
    ASSERT_EQ(o2m.size(), 3u);
    EXPECT_EQ(o2m[0].sizes(), (std::vector<int64_t>{1, 4 + 80, 8, 8}));
    EXPECT_TRUE(torch::equal(both[0], o2m[0]));
    EXPECT_TRUE(torch::equal(both[3], o2o[0]));
    EXPECT_TRUE(torch::allclose(o2o[0].slice(1, 0, 4), o2m[0].slice(1, 0, 4)));
    EXPECT_TRUE(torch::allclose(o2o[0].slice(1, 4), o2m[0].slice(1, 4) + 1.0, 1e-5, 1e-5));
    // Decoding reads the one-to-many maps of both.
    EXPECT_TRUE(torch::equal(head->decode(both), head->decode(o2m)));
  }
  // In training the one-to-one head's loss stops at the head: no gradient reaches the neck.
  head->select(Heads::kBoth);
  m->train();
  const auto both = m->forward_raw(x);
  (both[3].sum() + both[4].sum() + both[5].sum()).backward();
  EXPECT_TRUE(params["model.23.one2one_cv2.0.0.conv.weight"].grad().defined());
  EXPECT_FALSE(params["model.23.cv2.0.0.conv.weight"].grad().defined());
  EXPECT_FALSE(params["model.22.cv1.conv.weight"].grad().defined());
  DetectionModel plain = yolo::build_model(cfg("yolo11n"));
  auto* plain_head = dynamic_cast<yolo::AnchorFreeDetectImpl*>(plain->head_module().get());
  EXPECT_EQ(plain_head->selected(), Heads::kOne2Many);
  EXPECT_THROW(plain_head->select(Heads::kOne2One), std::runtime_error);
}

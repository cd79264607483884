#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "models/anchor_free_detect.h"
#include "models/yolo.h"
#include "utils/core/paths.h"
#include "utils/eval/anchor_free_loss.h"
#include "utils/eval/end2end_loss.h"
#include "utils/eval/loss.h"
#include "utils/eval/model_family.h"
#include "utils/eval/task_aligned_assigner.h"

namespace {
// P3/P4/P5 anchors of yolov5*.yaml in stride units.
torch::Tensor anchors() {
  return torch::tensor({10.f / 8, 13.f / 8, 16.f / 8, 30.f / 8, 33.f / 8, 23.f / 8, 30.f / 16,
                        61.f / 16, 62.f / 16, 45.f / 16, 59.f / 16, 119.f / 16, 116.f / 32,
                        90.f / 32, 156.f / 32, 198.f / 32, 373.f / 32, 326.f / 32})
      .view({3, 3, 2});
}
std::vector<torch::Tensor> zero_maps(int64_t bs, int nc, int64_t size = 64) {
  return {torch::zeros({bs, 3, size / 8, size / 8, 5 + nc}),
          torch::zeros({bs, 3, size / 16, size / 16, 5 + nc}),
          torch::zeros({bs, 3, size / 32, size / 32, 5 + nc})};
}
}  // namespace

TEST(Loss, CiouHandComputed) {
  // Same-shaped boxes offset by one: IoU 1/3, enclosing diagonal^2 13, centre distance^2 1.
  const torch::Tensor a = torch::tensor({{0.f, 0.f, 2.f, 2.f}});
  const torch::Tensor b = torch::tensor({{1.f, 0.f, 2.f, 2.f}});
  EXPECT_NEAR(yolo::bbox_ciou(a, b)[0].item<float>(), 1.f / 3 - 1.f / 13, 1e-5);
  EXPECT_NEAR(yolo::bbox_ciou(a, a)[0].item<float>(), 1.f, 1e-5);
  // Aspect-ratio term: a 2x1 box inside a 2x2 box with the same centre.
  const torch::Tensor c = torch::tensor({{0.f, 0.f, 2.f, 1.f}});
  const double iou = 0.5, v = 4 / (M_PI * M_PI) * std::pow(std::atan(2.0) - std::atan(1.0), 2);
  const double alpha = v / (v - iou + 1);
  EXPECT_NEAR(yolo::bbox_ciou(a, c)[0].item<float>(), iou - (0 + v * alpha), 1e-5);
}

TEST(Loss, BuildTargetsAssignsCentreAndNeighbourCells) {
  yolo::ComputeLoss loss(yolo::LossGains{}, 2, anchors());
  // One box in image 0, class 1, centre (0.53, 0.53), size 0.1 x 0.1 of a 64 px image.
  const torch::Tensor targets = torch::tensor({{0.f, 1.f, 0.53f, 0.53f, 0.1f, 0.1f}});
  const auto t = loss.build_targets(zero_maps(1, 2), targets);
  // P3 (8x8 cells): w = 0.8 cells fits only anchor 0 (ratio < 4); centre 4.24 -> cells 4, and the
  // left/upper neighbours (fraction 0.24 < 0.5); the right/lower ones are not used.
  ASSERT_EQ(t.indices[0][0].size(0), 3);
  EXPECT_TRUE(torch::equal(t.indices[0][1], torch::tensor({0, 0, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(t.indices[0][3], torch::tensor({4, 3, 4}, torch::kLong)));  // gi
  EXPECT_TRUE(torch::equal(t.indices[0][2], torch::tensor({4, 4, 3}, torch::kLong)));  // gj
  EXPECT_TRUE(torch::allclose(t.tbox[0][1], torch::tensor({1.24f, 0.24f, 0.8f, 0.8f}), 1e-4, 1e-4));
  EXPECT_TRUE(torch::equal(t.tcls[0], torch::tensor({1, 1, 1}, torch::kLong)));
  // P5 (2x2 cells): 0.2 cells against anchors >= 2.8 cells: ratio > 4, no assignment.
  EXPECT_EQ(t.indices[2][0].size(0), 0);
}

TEST(Loss, NoTargetsLeavesOnlyObjectnessTowardsZero) {
  yolo::LossGains g;
  g.obj = 0.7;
  yolo::ComputeLoss loss(g, 3, anchors());
  const auto r = loss(zero_maps(2, 3), torch::zeros({0, 6}));
  // Every objectness logit is 0: BCE = log 2 on each level, balanced 4 + 1 + 0.4.
  const double lobj = std::log(2.0) * (4.0 + 1.0 + 0.4) * 0.7;
  EXPECT_NEAR(r.items[0].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(r.items[1].item<double>(), lobj, 1e-5);
  EXPECT_NEAR(r.items[2].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(r.loss.item<double>(), lobj * 2, 1e-5);  // times the batch size
}

TEST(Loss, ClassLossUsesSmoothedTargetsAndBackpropagates) {
  yolo::LossGains g;
  g.box = 1;
  g.obj = 1;
  g.cls = 1;
  g.label_smoothing = 0.2;
  yolo::ComputeLoss loss(g, 2, anchors());
  auto maps = zero_maps(1, 2);
  for (auto& m : maps) m.requires_grad_(true);
  const torch::Tensor targets = torch::tensor({{0.f, 1.f, 0.53f, 0.53f, 0.1f, 0.1f}});
  const auto r = loss(maps, targets);
  // Zero logits: class BCE is log 2 whatever the (smoothed) target, averaged over entries.
  EXPECT_NEAR(r.items[2].item<double>(), std::log(2.0), 1e-5);
  EXPECT_GT(r.items[0].item<double>(), 0.0);
  r.loss.backward();
  // Gradient on the class logits of an assigned cell: (sigmoid(0) - target) / entries.
  const torch::Tensor grad = maps[0].grad()[0][0][4][4];
  const double entries = 3 * 2;  // three assigned cells x two classes
  EXPECT_NEAR(grad[5].item<double>(), (0.5 - 0.1) / entries, 1e-5);  // cn = 0.1
  EXPECT_NEAR(grad[6].item<double>(), (0.5 - 0.9) / entries, 1e-5);  // cp = 0.9
}

TEST(Loss, FocalLossDownweightsEasyNegatives) {
  yolo::LossGains plain, focal;
  focal.fl_gamma = 1.5;
  auto maps = zero_maps(1, 1);
  for (auto& m : maps) m.select(4, 4).fill_(-6.0);  // confident "no object": easy negatives
  const auto a = yolo::ComputeLoss(plain, 1, anchors())(maps, torch::zeros({0, 6}));
  const auto b = yolo::ComputeLoss(focal, 1, anchors())(maps, torch::zeros({0, 6}));
  const double p = 1 / (1 + std::exp(6.0));
  // focal = bce * (1 - alpha) * p^gamma for negatives
  EXPECT_NEAR(b.items[1].item<double>() / a.items[1].item<double>(), 0.75 * std::pow(p, 1.5), 1e-6);
}

// Under autocast the predictions arrive in a low-precision type (float16 on CUDA, bfloat16 on the
// CPU); the loss must still add up in float32, or the small per-level terms round away.
TEST(Loss, LowPrecisionPredictionsGiveAFloat32Loss) {
  yolo::LossGains g;
  g.box = 0.05;
  g.obj = 1.0;
  g.cls = 0.5;
  g.cls_pw = g.obj_pw = 1.0;
  g.anchor_t = 4.0;
  yolo::ComputeLoss loss(g, 3, anchors());
  torch::manual_seed(0);
  std::vector<torch::Tensor> p = zero_maps(4, 3, 128);
  for (auto& m : p) m = torch::randn(m.sizes()) * 2;
  const torch::Tensor targets = torch::tensor({{0.f, 1.f, 0.5f, 0.5f, 0.2f, 0.3f},
                                               {1.f, 0.f, 0.25f, 0.7f, 0.1f, 0.1f},
                                               {3.f, 2.f, 0.8f, 0.2f, 0.4f, 0.3f}});
  const yolo::LossResult ref = loss(p, targets);
  std::vector<torch::Tensor> low;
  for (const auto& m : p) low.push_back(m.to(torch::kBFloat16));
  const yolo::LossResult r = loss(low, targets);
  EXPECT_EQ(r.loss.scalar_type(), torch::kFloat);
  EXPECT_EQ(r.items.scalar_type(), torch::kFloat);
  // Only the predictions' own rounding (bfloat16 keeps ~3 significant digits) is left.
  const torch::Tensor rel = ((r.items - ref.items).abs() / ref.items).max();
  EXPECT_LT(rel.item<double>(), 5e-3) << r.items << ref.items;
}

// The dense form (what a GPU runs: no host reads) gives the compact form's loss and gradients,
// with focal loss and label smoothing, targets on cell borders and an image without targets.
TEST(Loss, DenseFormEqualsCompactForm) {
  torch::manual_seed(5);
  for (const double gamma : {0.0, 1.5}) {
    yolo::LossGains g;
    g.fl_gamma = gamma;
    g.label_smoothing = 0.1;
    yolo::ComputeLoss loss(g, 4, anchors());
    std::vector<torch::Tensor> maps;
    for (int64_t s : {16, 8, 4}) maps.push_back(torch::randn({3, 3, s, s, 9}));
    torch::Tensor targets = torch::rand({40, 6});
    targets.select(1, 0).copy_(torch::randint(0, 2, {40}));  // image 2 has none
    targets.select(1, 1).copy_(torch::randint(0, 4, {40}));
    targets.slice(1, 4, 6).mul_(0.6).add_(0.02);
    targets[0][2] = 0.5, targets[1][3] = 0.25;  // exactly on cell borders
    auto run = [&](bool dense) {
      std::vector<torch::Tensor> p;
      for (const auto& m : maps) p.push_back(m.clone().requires_grad_(true));
      const yolo::LossResult r = loss(p, targets, dense);
      r.loss.backward();
      std::vector<torch::Tensor> grads;
      for (const auto& x : p) grads.push_back(x.grad());
      return std::make_pair(r, grads);
    };
    const auto [compact, gc] = run(false);
    const auto [dense, gd] = run(true);
    EXPECT_TRUE(torch::allclose(compact.items, dense.items, 1e-5, 1e-7))
        << compact.items << dense.items;
    EXPECT_GT(compact.items[2].item<float>(), 0.f);  // the class term took part
    for (size_t i = 0; i < gc.size(); ++i) {
      EXPECT_TRUE(torch::allclose(gc[i], gd[i], 1e-4, 1e-7)) << "level " << i << " gamma " << gamma;
    }
  }
  // No targets at all.
  yolo::ComputeLoss loss(yolo::LossGains{}, 3, anchors());
  const auto maps = zero_maps(2, 3);
  EXPECT_TRUE(torch::allclose(loss(maps, torch::zeros({0, 6}), true).items,
                              loss(maps, torch::zeros({0, 6}), false).items));
}

// The dense assignment reads nothing back to the host: it runs on meta tensors, which have no
// data, and its sizes follow from the batch alone. The compact one cannot: its sizes are the
// number of assigned candidates, which only the data knows.
TEST(Loss, DenseAssignmentNeedsNoHostReads) {
  yolo::ComputeLoss loss(yolo::LossGains{}, 4, anchors().to(torch::kMeta));
  const auto meta = torch::TensorOptions().device(torch::kMeta);
  std::vector<torch::Tensor> p;
  for (int64_t s : {8, 4, 2}) p.push_back(torch::empty({2, 3, s, s, 9}, meta));
  const torch::Tensor targets = torch::empty({5, 6}, meta);
  const yolo::LossTargets tg = loss.build_dense_targets(p, targets);
  ASSERT_EQ(tg.weights.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(tg.weights[i].size(0), 5 * 3 * 5);  // neighbour cells x anchors x targets
    EXPECT_EQ(tg.indices[i][0].size(0), 5 * 3 * 5);
    EXPECT_EQ(tg.tbox[i].sizes(), (std::vector<int64_t>{5 * 3 * 5, 4}));
    // The gathers the loss then does on those indices.
    EXPECT_EQ(p[i].index({tg.indices[i][0], tg.indices[i][1], tg.indices[i][2], tg.indices[i][3]})
                  .sizes(),
              (std::vector<int64_t>{5 * 3 * 5, 9}));
  }
  EXPECT_ANY_THROW(loss.build_targets(p, targets));
}

// Ultralytics' task-aligned assignment: a 4 px box has no anchor centre inside it, but widened to
// the middle stride (16 px) it holds the four stride-8 centres around it.
TEST(AnchorFreeLoss, SmallBoxesAreWidenedToTheMiddleStride) {
  const auto [points, strides] =
      yolo::make_anchor_points({{8, 8}, {4, 4}, {2, 2}}, {8, 16, 32}, torch::TensorOptions());
  const torch::Tensor anchors = points * strides;  // pixels
  const int64_t a = anchors.size(0);
  const torch::Tensor gt = torch::tensor({30.f, 30.f, 34.f, 34.f}).view({1, 1, 4});
  const torch::Tensor scores = torch::full({1, a, 2}, 0.5);
  const torch::Tensor boxes = gt.expand({1, a, 4}).contiguous();  // every prediction on the box
  const torch::Tensor labels = torch::ones({1, 1, 1}), mask = torch::ones({1, 1, 1});
  yolo::TalOptions o;
  const yolo::TalTargets t = yolo::task_aligned_assign(scores, boxes, anchors, labels, gt, mask, o);
  EXPECT_EQ(t.fg.sum().item<int64_t>(), 4);
  EXPECT_TRUE(torch::all(t.labels.masked_select(t.fg) == 1).item<bool>());
  // Soft targets: align * max IoU / max align = 1 here (every IoU 1), on the box's class only.
  EXPECT_NEAR(t.scores.select(2, 1).sum().item<float>(), 4.f, 1e-5);
  EXPECT_EQ(t.scores.select(2, 0).sum().item<float>(), 0.f);
  o.widen_to = 0;
  EXPECT_EQ(yolo::task_aligned_assign(scores, boxes, anchors, labels, gt, mask, o)
                .fg.sum()
                .item<int64_t>(),
            0);
}

// A batch without boxes: only the class term (every logit towards 0), and it backpropagates.
TEST(AnchorFreeLoss, NoTargetsLeavesOnlyTheClassTerm) {
  const yolo::AnchorFreeLoss loss({}, 3, 16, {8, 16, 32});
  std::vector<torch::Tensor> p;
  for (int s : {8, 4, 2}) p.push_back(torch::randn({2, 64 + 3, s, s}, torch::requires_grad()));
  const yolo::LossResult r = loss(p, torch::zeros({0, 6}));
  EXPECT_EQ(r.items[0].item<float>(), 0.f);
  EXPECT_EQ(r.items[2].item<float>(), 0.f);
  EXPECT_GT(r.items[1].item<float>(), 0.f);
  EXPECT_NEAR(r.loss.item<float>(), 2 * r.items.sum().item<float>(), 1e-4);
  r.loss.backward();
  EXPECT_GT(p[0].grad().abs().sum().item<float>(), 0.f);
}

// The sparse form (the CPU's) and the dense one (an accelerator's) assign alike.
TEST(AnchorFreeLoss, SparseAndDenseAssignmentAgree) {
  torch::manual_seed(3);
  const auto [points, strides] =
      yolo::make_anchor_points({{8, 8}, {4, 4}, {2, 2}}, {8, 16, 32}, torch::TensorOptions());
  const torch::Tensor anchors = points * strides;
  const int64_t a = anchors.size(0);
  const torch::Tensor xy = torch::rand({2, 3, 2}) * 48 + 8, wh = torch::rand({2, 3, 2}) * 30 + 2;
  const torch::Tensor gt = torch::cat({xy - wh / 2, xy + wh / 2}, -1);
  const torch::Tensor mask = torch::tensor({1.f, 1.f, 1.f, 1.f, 1.f, 0.f}).view({2, 3, 1});
  const torch::Tensor labels = torch::randint(0, 4, {2, 3, 1}).to(torch::kFloat);
  const torch::Tensor scores = torch::rand({2, a, 4});
  const torch::Tensor pxy = anchors.unsqueeze(0) + torch::randn({2, a, 2}) * 4;
  const torch::Tensor pwh = torch::rand({2, a, 2}) * 30 + 2;
  const torch::Tensor boxes = torch::cat({pxy - pwh / 2, pxy + pwh / 2}, -1);
  yolo::TalOptions o;
  const yolo::TalTargets s = yolo::task_aligned_assign(scores, boxes, anchors, labels, gt, mask, o);
  o.dense = true;
  const yolo::TalTargets d = yolo::task_aligned_assign(scores, boxes, anchors, labels, gt, mask, o);
  EXPECT_GT(s.fg.sum().item<int64_t>(), 5);
  EXPECT_TRUE(torch::equal(s.fg, d.fg));
  EXPECT_TRUE(
      torch::equal(s.target_gt_idx.masked_select(s.fg), d.target_gt_idx.masked_select(d.fg)));
  EXPECT_TRUE(torch::allclose(s.scores, d.scores, 1e-6, 1e-7));
}

// Training's default memory format on the CPU (channels-last, with the fused BatchNorm+SiLU
// kernel) computes the same loss, gradients and running statistics as NCHW, and its eval-mode
// outputs are NCHW's, for YOLO26 (both heads, attention blocks, the residual SPPF).
TEST(MemoryFormat, Yolo26ChannelsLastTrainsAndInfersAsNchw) {
  const std::string cfg = yolo::project_root() + "/configs/models/yolo26n.yaml";
  torch::manual_seed(0);
  yolo::DetectionModel a = yolo::build_model(cfg, 3);
  torch::manual_seed(0);
  yolo::DetectionModel b = yolo::build_model(cfg, 3);
  yolo::to_channels_last(*b);
  torch::manual_seed(1);
  const torch::Tensor x = torch::rand({2, 3, 64, 64});
  const torch::Tensor targets = torch::tensor({{0.f, 0.f, 0.3f, 0.4f, 0.3f, 0.2f},
                                               {0.f, 2.f, 0.7f, 0.6f, 0.2f, 0.4f},
                                               {1.f, 1.f, 0.5f, 0.5f, 0.5f, 0.4f}});
  yolo::LossConfig config;
  a->train();
  b->train();
  const auto la = yolo::model_family(*a).make_loss(*a, config);
  const auto lb = yolo::model_family(*b).make_loss(*b, config);
  const yolo::LossResult ra = (*la)(a->forward_raw(x), targets);
  const yolo::LossResult rb =
      (*lb)(b->forward_raw(x.contiguous(at::MemoryFormat::ChannelsLast)), targets);
  EXPECT_NEAR(ra.loss.sum().item<float>(), rb.loss.sum().item<float>(),
              1e-5 * ra.loss.sum().item<float>());
  ra.loss.sum().backward();
  rb.loss.sum().backward();
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  int compared = 0;
  for (const auto& kv : pa) {
    const torch::Tensor ga = kv.value().grad(), gb = pb[kv.key()].grad();
    ASSERT_EQ(ga.defined(), gb.defined()) << kv.key();
    if (!ga.defined()) continue;
    // Parameters whose true gradient is zero (a BatchNorm's bias ahead of another BatchNorm) keep
    // float noise of about 1e-7; the floor covers it.
    const double scale = ga.abs().max().item<double>();
    EXPECT_LE((ga - gb).abs().max().item<double>(), 2e-3 * scale + 1e-6) << kv.key();
    ++compared;
  }
  EXPECT_GT(compared, 300);
  const auto ba = a->named_buffers(), bb = b->named_buffers();
  for (const auto& kv : ba) {
    if (!kv.value().is_floating_point()) continue;
    EXPECT_TRUE(torch::allclose(kv.value(), bb[kv.key()], 1e-4, 1e-5)) << kv.key();
  }
  torch::NoGradGuard no_grad;
  a->eval();
  b->eval();
  const auto oa = a->forward_raw(x);
  const auto ob = b->forward_raw(x.contiguous(at::MemoryFormat::ChannelsLast));
  ASSERT_EQ(oa.size(), ob.size());
  for (size_t i = 0; i < oa.size(); ++i) {
    EXPECT_TRUE(torch::allclose(oa[i], ob[i], 1e-4, 1e-4)) << "level " << i;
  }
}

#if TORCH_VERSION_MAJOR >= 2
namespace {

// What a loss call moves between host and device: its Tensor::to(device) calls (the only way the
// loss moves data; with non_blocking, the asynchronous copy of the target table) and its item()
// reads (each a wait for the GPU when the tensor is there).
struct DeviceTraffic {
  int moves = 0, async_moves = 0, reads = 0;
};

DeviceTraffic traffic_of(const std::function<void()>& call) {
  static thread_local DeviceTraffic* seen = nullptr;
  DeviceTraffic t;
  seen = &t;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                     -> std::unique_ptr<at::ObserverContext> {
        const auto op = fn.operator_name();
        if (!op) return nullptr;
        // to(device, dtype, non_blocking, ...) and to(options, non_blocking, ...), whose
        // arguments are dtype, layout, device, pin_memory, then non_blocking.
        const int non_blocking = op->overload_name == "device"         ? 3
                                 : op->overload_name == "dtype_layout" ? 5
                                                                       : -1;
        if (op->name == "aten::to" && non_blocking > 0) {
          ++seen->moves;
          const auto in = fn.inputs();
          if (static_cast<int>(in.size()) > non_blocking && in[non_blocking].isBool() &&
              in[non_blocking].toBool()) {
            ++seen->async_moves;
          }
        }
        if (op->name == "aten::_local_scalar_dense") ++seen->reads;
        return nullptr;
      }).needsInputs(true));
  try {
    call();
  } catch (...) {
    at::removeCallback(handle);
    throw;
  }
  at::removeCallback(handle);
  seen = nullptr;
  return t;
}

std::vector<torch::Tensor> random_maps(int64_t bs, int64_t channels, int heads) {
  torch::manual_seed(0);
  std::vector<torch::Tensor> p;
  for (int h = 0; h < heads; ++h) {
    for (int64_t s : {8, 4, 2}) p.push_back(torch::randn({bs, channels, s, s}));
  }
  return p;
}

}  // namespace

// On a GPU every device move or read in the loss is a cost in the step: the anchor-free losses
// take the loader's host rows, convert them on the host once and send the padded table to the
// device once, asynchronously, and read nothing back. YOLO11's loss (DFL) and YOLO26's end-to-end
// loss (two branches sharing one table, the L1 term's scale filled on the device) alike.
TEST(AnchorFreeLoss, TargetsCrossToTheDeviceOnceAndNothingIsReadBack) {
  const torch::Tensor targets = torch::tensor({0.f, 1.f, 0.5f, 0.5f, 0.2f, 0.3f,  //
                                               0.f, 2.f, 0.3f, 0.6f, 0.1f, 0.1f,  //
                                               1.f, 0.f, 0.7f, 0.2f, 0.3f, 0.3f})
                                    .view({3, 6});
  const std::vector<float> strides{8, 16, 32};
  yolo::TalOptions dense;
  dense.dense = true;  // the GPU's assignment (the CPU's compact one counts its candidates)
  yolo::AnchorFreeLoss dfl(yolo::AnchorFreeGains{}, 3, 16, strides, dense);
  const auto maps = random_maps(2, 4 * 16 + 3, 1);
  yolo::LossResult r;
  const DeviceTraffic a = traffic_of([&] { r = dfl(maps, targets); });
  EXPECT_EQ(a.moves, 2) << "the rows to float on the host, the table to the device";
  EXPECT_EQ(a.async_moves, 1);
  EXPECT_EQ(a.reads, 0);
  EXPECT_TRUE(std::isfinite(r.loss.item<float>()));

  yolo::End2EndLoss e2e(yolo::AnchorFreeGains{}, 3, 1, strides);
  const auto maps2 = random_maps(2, 4 + 3, 2);
  const DeviceTraffic b = traffic_of([&] { r = e2e(maps2, targets); });
  EXPECT_EQ(b.moves, 2) << "both branches share one target table";
  EXPECT_EQ(b.async_moves, 1);
  EXPECT_TRUE(std::isfinite(r.loss.item<float>()));
}

// The target table: per image its rows in order, zero padded to the fullest image.
TEST(AnchorFreeLoss, PreparedTargetsArePaddedPerImage) {
  yolo::AnchorFreeLoss loss(yolo::AnchorFreeGains{}, 3, 16, {8, 16, 32});
  const torch::Tensor targets = torch::tensor({0.f, 1.f, 0.5f, 0.5f, 0.2f, 0.3f,  //
                                               2.f, 0.f, 0.7f, 0.2f, 0.3f, 0.3f,  //
                                               2.f, 2.f, 0.3f, 0.6f, 0.1f, 0.1f})
                                    .view({3, 6});
  const torch::Tensor t = loss.prepare_targets(targets, 3, torch::kCPU);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{3, 2, 5}));
  EXPECT_TRUE(torch::equal(t[0][0], targets[0].slice(0, 1)));
  EXPECT_TRUE(torch::equal(t[0][1], torch::zeros({5})));
  EXPECT_TRUE(torch::equal(t[1], torch::zeros({2, 5})));
  EXPECT_TRUE(torch::equal(t[2][0], targets[1].slice(0, 1)));
  EXPECT_TRUE(torch::equal(t[2][1], targets[2].slice(0, 1)));
  EXPECT_EQ(loss.prepare_targets(torch::zeros({0, 6}), 2, torch::kCPU).sizes(),
            (std::vector<int64_t>{2, 0, 5}));
  EXPECT_ANY_THROW(loss.prepare_targets(targets, 2, torch::kCPU));  // image 2 of a batch of 2
}
#endif

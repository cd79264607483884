// The validator's batched path (NMS of the whole batch as the GPU runs it, one copy of the kept
// boxes per batch) gives the per-image path's metrics on the CPU: exactly when that path ranks
// equal confidences the same way, within 0.002 otherwise; from float or uint8 batches.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/dataset.h"
#include "data/dataset_config.h"
#include "data/loader.h"
#include "data/shapes_dataset.h"
#include "models/yolo.h"
#include "utils/core/paths.h"
#include "utils/eval/boxes.h"
#include "utils/eval/loss.h"
#include "utils/eval/metrics.h"
#include "utils/eval/nms.h"
#include "utils/eval/validator.h"

namespace fs = std::filesystem;

namespace {

class ValidatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("yolo_validator_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    yolo::ShapesSpec spec;
    spec.train = 1;
    spec.val = 24;
    spec.width = 128;
    yolo::ensure_shapes_dataset((root_ / "shapes").string(), spec);
    std::ofstream(root_ / "shapes.yaml") << "path: " << (root_ / "shapes").string()
                                         << "\ntrain: images/train\nval: images/val\n"
                                            "names: [circle, rectangle, triangle]\n";
    torch::manual_seed(0);
    // Untrained: at conf 0.001 every image brings hundreds of crowded boxes, some of which match
    // labels; training first would cost minutes on 2 cores.
    model_ = yolo::build_model(yolo::project_root() + "/configs/models/yolov5n.yaml", 3);
    model_->eval();
  }
  static void TearDownTestSuite() {
    model_ = yolo::DetectionModel(nullptr);
    fs::remove_all(root_);
  }

  static std::unique_ptr<yolo::DataLoader> val_loader(bool float_images) {
    constexpr int batch = 8;
    yolo::DatasetOptions d;
    d.imgsz = 128;
    d.batch_size = batch;
    d.rect = true;
    d.pad = 0.5;
    d.nc = 3;
    d.hyp = yolo::AugmentHyp::none();
    auto ds = std::make_shared<yolo::YoloDataset>(
        yolo::load_dataset_config((root_ / "shapes.yaml").string()).val, d);
    yolo::LoaderOptions lo;
    lo.batch_size = batch;
    lo.shuffle = false;
    lo.workers = 0;
    lo.float_images = float_images;
    return std::make_unique<yolo::DataLoader>(ds, lo);
  }

  static fs::path root_;
  static yolo::DetectionModel model_;
};

fs::path ValidatorTest::root_;
yolo::DetectionModel ValidatorTest::model_{nullptr};

struct Metrics {
  double mp = 0, mr = 0, map50 = 0, map = 0;
  int seen = 0;
  size_t predictions = 0, tp50 = 0;
};

// The metrics part of the validator as it was: NMS image by image (non_max_suppression), each
// image's boxes matched in original pixels, ap_per_class over the whole set.
Metrics per_image_validation(yolo::DetectionModel& m, yolo::DataLoader& loader, bool stable_ties) {
  torch::NoGradGuard no_grad;
  yolo::NmsOptions o;
  o.stable_ties = stable_ties;
  o.conf_thres = 0.001;
  o.iou_thres = 0.6;
  o.max_det = 300;
  o.multi_label = true;
  const std::vector<double> iouv = yolo::iou_thresholds();
  std::vector<std::vector<bool>> tp;
  std::vector<double> conf;
  std::vector<int> pred_cls, target_cls;
  Metrics r;
  loader.start_epoch(0);
  while (std::optional<yolo::Batch> b = loader.next()) {
    const at::Tensor im = yolo::images_to_device(b->images, torch::kCPU);
    const std::vector<at::Tensor> preds = yolo::non_max_suppression(m->forward(im).pred, o);
    const float h = static_cast<float>(im.size(2)), w = static_cast<float>(im.size(3));
    at::Tensor tl = b->targets.clone();
    tl.slice(1, 2, 6).mul_(torch::tensor({w, h, w, h}));
    for (int64_t si = 0; si < im.size(0); ++si) {
      ++r.seen;
      const yolo::ShapeInfo& s = b->shapes[si];
      const at::Tensor labels = tl.index({tl.select(1, 0) == si}).slice(1, 1);
      for (int64_t k = 0; k < labels.size(0); ++k) target_cls.push_back(labels[k][0].item<int>());
      at::Tensor tbox = yolo::xywh2xyxy(labels.slice(1, 1, 5));
      at::Tensor predn = preds[si].clone();
      at::Tensor pb = predn.slice(1, 0, 4);
      yolo::scale_boxes(tbox, s.ratio_w, s.ratio_h, s.pad_w, s.pad_h, s.h0, s.w0);
      yolo::scale_boxes(pb, s.ratio_w, s.ratio_h, s.pad_w, s.pad_h, s.h0, s.w0);
      const at::Tensor correct =
          yolo::match_predictions(predn, torch::cat({labels.slice(1, 0, 1), tbox}, 1), iouv);
      const auto ca = correct.accessor<bool, 2>();
      const auto pa = predn.accessor<float, 2>();
      for (int64_t k = 0; k < predn.size(0); ++k) {
        std::vector<bool> row;
        for (size_t t = 0; t < iouv.size(); ++t) row.push_back(ca[k][t]);
        r.tp50 += row[0];
        tp.push_back(row);
        conf.push_back(pa[k][4]);
        pred_cls.push_back(static_cast<int>(pa[k][5]));
      }
    }
  }
  const yolo::ApResult ap = yolo::ap_per_class(tp, conf, pred_cls, target_cls);
  r.mp = ap.mp;
  r.mr = ap.mr;
  r.map50 = ap.map50;
  r.map = ap.map;
  r.predictions = conf.size();
  return r;
}

// On the CPU's schedule the validator gives the per-image path's metrics; on the GPU's, those of
// the per-image path with equal confidences in candidate order, which moves them by far less than
// 0.002 from the CPU's.
TEST_F(ValidatorTest, BatchedNmsGivesThePerImageMetrics) {
  auto loader = val_loader(true);
  const Metrics cpu = per_image_validation(model_, *loader, false);
  const Metrics stable = per_image_validation(model_, *loader, true);
  ASSERT_EQ(cpu.seen, 24);
  ASSERT_GT(cpu.predictions, 24u * 50);  // crowded enough for NMS to matter
  ASSERT_GT(cpu.tp50, 10u);              // and enough matches for the metrics to depend on it
  ASSERT_GT(cpu.map50, 0);
  for (const bool device_schedule : {true, false}) {
    const Metrics& want = device_schedule ? stable : cpu;
    for (const bool float_images : {true, false}) {
      yolo::ValConfig vc;
      vc.progress = false;
      vc.nms_device_schedule = device_schedule;
      auto l = val_loader(float_images);
      const yolo::ValResult got = yolo::run_validation(model_, *l, vc, nullptr, torch::kCPU);
      const std::string what = std::string(device_schedule ? "device" : "CPU") + " schedule, " +
                               (float_images ? "float" : "uint8") + " images";
      EXPECT_EQ(got.seen, want.seen) << what;
      EXPECT_EQ(got.mp, want.mp) << what;
      EXPECT_EQ(got.mr, want.mr) << what;
      EXPECT_EQ(got.map50, want.map50) << what;
      EXPECT_EQ(got.map, want.map) << what;
      EXPECT_NEAR(got.map50, cpu.map50, 0.002) << what;
      EXPECT_NEAR(got.map, cpu.map, 0.002) << what;
    }
  }
}

// The loss summed on the device and read once equals the per-batch sum of the loss's items.
TEST_F(ValidatorTest, LossIsTheMeanOfTheBatches) {
  const yolo::ComputeLoss loss(yolo::LossGains{}, 3, model_->detect()->anchors);
  yolo::ValConfig vc;
  vc.progress = false;
  auto loader = val_loader(true);
  const yolo::ValResult a = yolo::run_validation(model_, *loader, vc, &loss, torch::kCPU);
  at::Tensor sum = torch::zeros({3});
  int batches = 0;
  {
    torch::NoGradGuard no_grad;
    loader->start_epoch(0);
    while (std::optional<yolo::Batch> b = loader->next()) {
      sum += loss(model_->forward(b->images).raw, b->targets).items;
      ++batches;
    }
  }
  for (int k = 0; k < 3; ++k) EXPECT_EQ(a.loss[k], sum[k].item<double>() / batches) << k;
}

}  // namespace

// YOLOv5's train.py validates best.pt at NMS IoU 0.65 on COCO (its val split is one list file,
// coco/val2017.txt) and at 0.60 elsewhere.
TEST(FinalValidation, IouIsCocosOnCocoAndValsDefaultElsewhere) {
  yolo::DatasetConfig coco;
  coco.val = {"/data/coco/val2017.txt"};
  EXPECT_DOUBLE_EQ(yolo::final_validation_iou(coco), 0.65);
  yolo::DatasetConfig other;
  other.val = {"/data/shapes/images/val"};
  EXPECT_DOUBLE_EQ(yolo::final_validation_iou(other), 0.60);
  EXPECT_DOUBLE_EQ(yolo::final_validation_iou(other), yolo::ValConfig().iou_thres);
}

// End-to-end training on tiny generated data: an overfit batch's loss falls and mAP rises, runs
// are reproducible,
// val reproduces the final metrics from best.pt, and detect writes images and labels.
#include <c10/util/Backtrace.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <opencv2/imgcodecs.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "data/dataset.h"
#include "data/dataset_config.h"
#include "data/loader.h"
#include "data/shapes_dataset.h"
#include "models/yolo.h"
#include "utils/core/errors.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/core/runtime/torch_compat.h"
#include "utils/engine/evolve.h"
#include "utils/engine/hyp.h"
#include "utils/engine/optim.h"
#include "utils/engine/train_callbacks.h"
#include "utils/engine/train_config.h"
#include "utils/engine/trainer.h"
#include "utils/eval/loss.h"
#include "utils/eval/model_loader.h"
#include "utils/eval/predictor.h"
#include "utils/eval/validator.h"
#include "utils/viz/plots.h"
#include "yolo/detector.h"
#include "yolo/train.h"

namespace fs = std::filesystem;

namespace {

// One shared tiny dataset for the suite: 64 train / 16 val images, 128 px wide.
class TrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("yolo_train_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    yolo::ShapesSpec spec;
    spec.train = 64;
    spec.val = 16;
    spec.width = 128;
    yolo::ensure_shapes_dataset((root_ / "shapes").string(), spec);
    std::ofstream(root_ / "shapes.yaml") << "path: " << (root_ / "shapes").string()
                                         << "\ntrain: images/train\nval: images/val\n"
                                            "names: [circle, rectangle, triangle]\n";
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  // A test that stops its own Trainer leaves the request behind; train() clears it, fit() not.
  void SetUp() override { yolo::clear_stop_request(); }

  static yolo::Options options(const std::string& name, int epochs) {
    yolo::Options o;
    o.cfg = "yolov5n.yaml";
    o.data = (root_ / "shapes.yaml").string();
    o.epochs = epochs;
    o.batch_size = 8;
    o.imgsz = 128;
    o.workers = 2;
    o.device = "cpu";
    o.project = (root_ / "runs").string();
    o.name = name;
    o.noplots = true;
    o.seed = 3;
    return o;
  }
  static fs::path root_;
};
fs::path TrainTest::root_;

// Every label file of `a` is in `b` with the same rows, to rounding.
void expect_same_labels(const fs::path& a_dir, const fs::path& b_dir) {
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(a_dir)) {
    std::ifstream a(e.path()), b(b_dir / e.path().filename());
    ASSERT_TRUE(b.good()) << e.path().filename() << " missing in " << b_dir;
    double x = 0, y = 0;
    while (a >> x) {
      ASSERT_TRUE(b >> y) << e.path().filename();
      EXPECT_NEAR(x, y, 1e-4) << e.path().filename();
    }
    EXPECT_FALSE(b >> y) << e.path().filename() << " has more rows in " << b_dir;
    ++files;
  }
  EXPECT_GT(files, 5u);
}

// detect --batch-size 5 on copies of one image writes the labels --batch-size 1 writes, to
// rounding.
void expect_batches_as_one_by_one(yolo::DetectConfig dc, const fs::path& image,
                                  const fs::path& dir) {
  fs::create_directories(dir);
  for (int k = 0; k < 7; ++k) {
    fs::copy_file(image, dir / ("im" + std::to_string(k) + ".png"),
                  fs::copy_options::overwrite_existing);
  }
  dc.source = dir.string();
  dc.name = "one_by_one";
  const fs::path one_by_one = yolo::run_detect(dc);
  dc.batch_size = 5;
  dc.name = "batched";
  expect_same_labels(one_by_one / "labels", fs::path(yolo::run_detect(dc)) / "labels");
}

}  // namespace

TEST_F(TrainTest, EndToEndWritesEverythingAndValReproducesIt) {
  yolo::Options o = options("learn", 4);
  o.noplots = false;
  const yolo::TrainSummary s = yolo::train(yolo::resolve(o));
  const fs::path dir(s.save_dir);
  const yolo::ResultsTable t = yolo::read_results_csv((dir / "results.csv").string());
  ASSERT_EQ(t.rows.size(), 4u);
  auto col = [&](const std::string& name) {
    const size_t c = std::find(t.columns.begin(), t.columns.end(), name) - t.columns.begin();
    EXPECT_LT(c, t.columns.size()) << name;
    return c;
  };
  const size_t box = col("train/box_loss"), lr0 = col("x/lr0"), lr1 = col("x/lr1");
  // The box loss falls over the run; warmup moves the bias lr down and the others up.
  EXPECT_LT(t.rows.back()[box], t.rows.front()[box]) << "training box loss did not fall";
  EXPECT_GT(t.rows.front()[lr0], t.rows.back()[lr0]);
  EXPECT_LT(t.rows.front()[lr1], t.rows.back()[lr1]);
  for (const char* f : {"weights/last.pt", "weights/best.pt", "opt.yaml", "hyp.yaml", "results.png",
                        "labels.jpg", "train_batch0.jpg", "val_batch0_pred.jpg", "PR_curve.png",
                        "F1_curve.png", "confusion_matrix.png"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  }
  // Final weights are stripped of optimizer state, as YOLOv5 does.
  EXPECT_FALSE(yolo::load_checkpoint((dir / "weights/last.pt").string()).has_optimizer());

  // val on best.pt reproduces the final validation.
  yolo::LoadedModel lm = yolo::load_model_for_inference((dir / "weights/best.pt").string(), "", "");
  yolo::to_channels_last(*lm.model);  // as train and val on the CPU
  EXPECT_EQ(lm.names, (std::vector<std::string>{"circle", "rectangle", "triangle"}));
  yolo::DatasetOptions d;
  d.imgsz = 128;
  d.batch_size = 16;
  d.rect = true;
  d.pad = 0.5;
  d.nc = 3;
  d.hyp = yolo::AugmentHyp::none();
  auto ds = std::make_shared<yolo::YoloDataset>(
      yolo::load_dataset_config((root_ / "shapes.yaml").string()).val, d);
  yolo::LoaderOptions lo;
  lo.batch_size = 16;
  lo.shuffle = false;
  yolo::DataLoader loader(ds, lo);
  yolo::ValConfig vc;
  const yolo::ValResult vr = yolo::run_validation(lm.model, loader, vc, nullptr, torch::kCPU);
  EXPECT_NEAR(vr.map50, s.final_results[2], 1e-6);
  EXPECT_NEAR(vr.map, s.final_results[3], 1e-6);

  // detect writes annotated images and YOLO-format labels.
  yolo::DetectConfig dc;
  dc.weights = (dir / "weights/best.pt").string();
  dc.source = (root_ / "shapes/images/val").string();
  dc.imgsz = {128};
  dc.device = "cpu";
  dc.conf_thres = 0.001;  // a briefly trained model: labels are written only where it finds boxes
  dc.save_txt = true;
  dc.project = (root_ / "detect").string();
  const fs::path out = yolo::run_detect(dc);
  size_t images = 0, labels = 0;
  for (const auto& e : fs::directory_iterator(out)) images += e.path().extension() == ".png";
  for (const auto& e : fs::directory_iterator(out / "labels")) labels += e.is_regular_file();
  EXPECT_EQ(images, 16u);
  EXPECT_GT(labels, 0u);

  // --hide-labels draws the boxes alone, --agnostic-nms keeps no two boxes over --iou-thres of
  // each other whatever their classes.
  dc.conf_thres = 0.001;
  dc.name = "plain";
  const fs::path plain_dir = yolo::run_detect(dc);
  std::string first;  // the image with the most detections
  uintmax_t most = 0;
  for (const auto& e : fs::directory_iterator(plain_dir / "labels")) {
    if (fs::file_size(e.path()) > most) {
      most = fs::file_size(e.path());
      first = e.path().stem().string();
    }
  }
  ASSERT_GT(most, 0u);
  dc.name = "hidden";
  dc.hide_labels = true;
  const cv::Mat plain = cv::imread((plain_dir / (first + ".png")).string());
  const cv::Mat hidden = cv::imread((fs::path(yolo::run_detect(dc)) / (first + ".png")).string());
  ASSERT_FALSE(plain.empty());
  ASSERT_EQ(plain.size(), hidden.size());
  EXPECT_GT(cv::norm(plain, hidden, cv::NORM_L1), 0);
  yolo::DetectorOptions agnostic;
  agnostic.device = "cpu";
  agnostic.imgsz = 128;
  agnostic.conf_thres = 0.001f;
  agnostic.agnostic_nms = true;
  const cv::Mat im = cv::imread((root_ / "shapes/images/val" / (first + ".png")).string());
  const auto boxes = yolo::Detector(dc.weights, agnostic).detect(im);
  agnostic.agnostic_nms = false;
  EXPECT_LT(boxes.size(), yolo::Detector(dc.weights, agnostic).detect(im).size());
  // Boxes clipped at the image's border may overlap more than they did when NMS compared them.
  auto inside = [&](const yolo::Detection& d) {
    return d.x1 > 0 && d.y1 > 0 && d.x2 < im.cols && d.y2 < im.rows;
  };
  for (size_t a = 0; a < boxes.size(); ++a) {
    for (size_t b = a + 1; b < boxes.size(); ++b) {
      if (!inside(boxes[a]) || !inside(boxes[b])) continue;
      const float iw = std::min(boxes[a].x2, boxes[b].x2) - std::max(boxes[a].x1, boxes[b].x1);
      const float ih = std::min(boxes[a].y2, boxes[b].y2) - std::max(boxes[a].y1, boxes[b].y1);
      const float inter = std::max(iw, 0.f) * std::max(ih, 0.f);
      auto area = [](const yolo::Detection& d) { return (d.x2 - d.x1) * (d.y2 - d.y1); };
      // The default NMS IoU of a YOLOv5 model (-1: the family's) is detect.py's 0.45.
      EXPECT_LE(inter / (area(boxes[a]) + area(boxes[b]) - inter), 0.45 + 1e-3);
    }
  }

  dc.hide_labels = false;
  expect_batches_as_one_by_one(dc, root_ / "shapes/images/val" / (first + ".png"),
                               root_ / "same_size");
}

// Model + loss + optimizer can fit: one fixed batch, plain SGD; the loss falls and the mAP on
// that batch rises. (The full YOLOv5 schedule needs thousands of steps, more than a unit test.)
TEST_F(TrainTest, OverfitsOneBatch) {
  torch::manual_seed(0);
  yolo::DetectionModel m =
      yolo::build_model(yolo::project_root() + "/configs/models/yolov5n.yaml", 3);
  const auto images = yolo::load_dataset_config((root_ / "shapes.yaml").string()).train;
  std::ofstream list(root_ / "batch.txt");
  for (int i = 0; i < 8; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "train_%05d.png", i);
    list << (root_ / "shapes/images/train" / name).string() << "\n";
  }
  list.close();
  yolo::DatasetOptions d;
  d.imgsz = 128;
  d.nc = 3;
  d.hyp = yolo::AugmentHyp::none();
  auto ds = std::make_shared<yolo::YoloDataset>(
      std::vector<std::string>{(root_ / "batch.txt").string()}, d);
  ASSERT_EQ(ds->size(), 8u);
  yolo::LoaderOptions lo;
  lo.batch_size = 8;
  lo.shuffle = false;
  yolo::DataLoader loader(ds, lo);
  loader.start_epoch(0);
  const yolo::Batch b = *loader.next();
  const yolo::Hyp hyp = yolo::load_hyp(yolo::project_root() + "/hyp/hyp.scratch-low.yaml");
  yolo::ComputeLoss loss(yolo::scale_loss_gains(hyp, 3, 3, 128, 0.0), 3, m->detect()->anchors);
  const yolo::ValConfig vc;
  const double map_before = yolo::run_validation(m, loader, vc, nullptr, torch::kCPU).map50;
  auto opt = yolo::make_optimizer("SGD", yolo::split_param_groups(*m), 0.05, 0.9, 0.0);
  m->train();
  std::vector<double> losses;
  for (int step = 0; step < 80; ++step) {
    opt->zero_grad();
    const auto r = loss(m->forward(b.images).raw, b.targets);
    r.loss.backward();
    opt->step();
    losses.push_back(r.loss.item<double>());
  }
  EXPECT_LT(losses.back(), losses.front() * 0.7) << losses.front() << " -> " << losses.back();
  const double map_after = yolo::run_validation(m, loader, vc, nullptr, torch::kCPU).map50;
  EXPECT_GT(map_after, map_before + 0.04) << map_before << " -> " << map_after;
}

TEST_F(TrainTest, SameSeedGivesSameWeights) {
  const yolo::TrainSummary a = yolo::train(yolo::resolve(options("seed_a", 1)));
  const yolo::TrainSummary b = yolo::train(yolo::resolve(options("seed_b", 1)));
  const auto wa = yolo::load_checkpoint(a.save_dir + "/weights/last.pt").model;
  const auto wb = yolo::load_checkpoint(b.save_dir + "/weights/last.pt").model;
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [k, t] : wa) EXPECT_TRUE(torch::equal(t, wb.at(k))) << k;
}

// Training 3 epochs straight equals training, stopping after epoch 0, and resuming.
TEST_F(TrainTest, ResumeGivesTheSameWeights) {
  const yolo::TrainSummary a = yolo::train(yolo::resolve(options("straight", 3)));
  // A callback of the caller's asks for the stop once epoch 0's checkpoint is taken.
  struct StopAfterFirst : yolo::Callback {
    void on_fit_epoch_end(const yolo::EpochReport& r) override {
      if (r.epoch == 0) yolo::request_stop();
    }
  };
  std::vector<std::unique_ptr<yolo::Callback>> stop_after_first;
  stop_after_first.push_back(std::make_unique<StopAfterFirst>());
  EXPECT_THROW(yolo::train(yolo::resolve(options("split", 3)), std::move(stop_after_first)),
               yolo::TrainingInterrupted);
  const std::string last = (root_ / "runs/split/weights/last.pt").string();
  const yolo::Checkpoint mid = yolo::load_checkpoint(last);
  EXPECT_EQ(mid.epoch, 0);
  EXPECT_TRUE(mid.has_optimizer());
  yolo::Options r;
  r.resume = true;
  r.resume_path = last;
  r.given = {"resume"};
  const yolo::TrainSummary b = yolo::train(yolo::resolve(r));
  EXPECT_EQ(b.save_dir, (root_ / "runs/split").string());
  const auto wa = yolo::load_checkpoint(a.save_dir + "/weights/last.pt").model;
  const auto wb = yolo::load_checkpoint(last).model;
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [k, t] : wa) EXPECT_TRUE(torch::allclose(t, wb.at(k), 1e-6, 1e-7)) << k;
  // results.csv continues: one row per epoch.
  EXPECT_EQ(yolo::read_results_csv((root_ / "runs/split/results.csv").string()).rows.size(), 3u);
  // A finished run says so and trains nothing more.
  EXPECT_EQ(yolo::train(yolo::resolve(r)).epochs_run, 3);
  // Flags other than --device/--workers are refused; stripped checkpoints cannot resume.
  yolo::Options bad = r;
  bad.given = {"resume", "epochs"};
  EXPECT_THROW(yolo::train(yolo::resolve(bad)), yolo::UsageError);
  yolo::Options missing = r;
  missing.resume_path = (root_ / "nope/weights/last.pt").string();
  EXPECT_THROW(yolo::train(yolo::resolve(missing)), yolo::UsageError);
}

TEST_F(TrainTest, EvolveMutatesWithinLimitsAndContinues) {
  yolo::Options o = options("ev", 1);
  o.project = (root_ / "evolve").string();
  o.given = {"project"};
  o.evolve = 2;
  const std::string dir = yolo::evolve(yolo::resolve(o));
  const auto t = yolo::read_results_csv(dir + "/evolve.csv");
  const auto& genes = yolo::evolve_genes();
  ASSERT_EQ(t.rows.size(), 2u);
  ASSERT_EQ(t.columns.size(), 7 + genes.size());
  EXPECT_EQ(t.columns[7], "lr0");
  bool changed = false;
  for (size_t i = 0; i < genes.size(); ++i) {
    for (const auto& r : t.rows) {
      EXPECT_GE(r[7 + i], genes[i].lower) << genes[i].key;
      EXPECT_LE(r[7 + i], genes[i].upper) << genes[i].key;
    }
    if (genes[i].gain == 0) {
      EXPECT_EQ(t.rows[0][7 + i], t.rows[1][7 + i]) << genes[i].key;
    }
    changed |= t.rows[0][7 + i] != t.rows[1][7 + i];
  }
  EXPECT_TRUE(changed) << "the second generation did not mutate";
  EXPECT_TRUE(fs::exists(dir + "/hyp_evolve.yaml"));
  EXPECT_TRUE(fs::exists(dir + "/evolve.png"));
  EXPECT_NO_THROW(yolo::load_hyp(dir + "/hyp_evolve.yaml"));
  // The anchor count evolves too (YOLOv5's meta: 2.0-10.0, 3 when the hyp file has none).
  EXPECT_EQ(t.rows[0][t.column("anchors")], 3);
  // A third generation in the same dir continues the file, also one written without the anchors
  // gene (an older trainer's): it is rewritten with it.
  {
    std::ifstream in(dir + "/evolve.csv");
    std::ostringstream kept;
    const size_t drop = t.column("anchors");
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> cells;
      std::stringstream ss(line);
      for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
      cells.erase(cells.begin() + static_cast<long>(drop));
      for (size_t i = 0; i < cells.size(); ++i) kept << (i ? "," : "") << cells[i];
      kept << "\n";
    }
    std::ofstream(dir + "/evolve.csv") << kept.str();
  }
  o.evolve = 1;
  o.exist_ok = true;
  EXPECT_EQ(yolo::evolve(yolo::resolve(o)), dir);
  const auto t3 = yolo::read_results_csv(dir + "/evolve.csv");
  ASSERT_EQ(t3.rows.size(), 3u);
  EXPECT_EQ(t3.columns, t.columns);
  EXPECT_EQ(t3.rows[0][t3.column("anchors")], 3);  // from the hyp's start value
  o.resume = true;
  EXPECT_THROW(yolo::evolve(yolo::resolve(o)), yolo::UsageError);
}

TEST(Evolve, MutationKeepsLimitsAndFixedGenes) {
  std::mt19937_64 rng(1);
  std::vector<double> parent;
  for (const auto& g : yolo::evolve_genes()) parent.push_back(g.upper);
  for (int k = 0; k < 50; ++k) {
    const auto child = yolo::mutate(parent, rng);
    for (size_t i = 0; i < child.size(); ++i) {
      const auto& g = yolo::evolve_genes()[i];
      EXPECT_GE(child[i], g.lower);
      EXPECT_LE(child[i], g.upper);
      if (g.gain == 0) {
        EXPECT_EQ(child[i], parent[i]) << g.key;
      }
    }
  }
  // Selection favours fitter rows: the fittest of two wins most draws.
  std::vector<std::vector<double>> rows(2, std::vector<double>(7 + parent.size(), 0.0));
  rows[0][3] = 0.9;
  rows[0][7] = 1;
  rows[1][3] = 0.1;
  rows[1][7] = 2;
  int first = 0;
  for (int k = 0; k < 200; ++k) first += yolo::select_parent(rows, rng)[0] == 1;
  EXPECT_GT(first, 150);
  // The family's fitness decides: row 0 leads on mAP50, row 1 on mAP50-95 alone (anchor-free).
  rows[0][2] = 0.9, rows[0][3] = 0.1;
  rows[1][2] = 0.0, rows[1][3] = 0.15;
  int yolov5_first = 0, anchor_free_first = 0;
  for (int k = 0; k < 200; ++k) {
    yolov5_first += yolo::select_parent(rows, rng, 0.1)[0] == 1;
    anchor_free_first += yolo::select_parent(rows, rng, 0.0)[0] == 1;
  }
  EXPECT_GT(yolov5_first, 190);
  EXPECT_LT(anchor_free_first, 10);
}

TEST_F(TrainTest, RunDirsIncrementAndOptionsAreSaved) {
  yolo::Options o = options("inc", 1);
  o.noval = true;
  o.nosave = true;
  const auto a = yolo::train(yolo::resolve(o));
  const auto b = yolo::train(yolo::resolve(o));
  EXPECT_EQ(fs::path(a.save_dir).filename(), "inc");
  EXPECT_EQ(fs::path(b.save_dir).filename(), "inc2");
  const yolo::Options saved = yolo::load_options(b.save_dir + "/opt.yaml");
  EXPECT_EQ(saved.save_dir, b.save_dir);
  EXPECT_EQ(saved.epochs, 1);
  EXPECT_TRUE(saved.noval);
}

// --batch-size -1 on the CPU trains with YOLOv5's default 16 and records it; --quad trains on
// quarter batches of double-size images (the loss stays finite and the run completes).
TEST_F(TrainTest, AutoBatchOnTheCpuTakes16AndQuadTrains) {
  yolo::Options o = options("autobatch_quad", 1);
  o.batch_size = -1;
  o.quad = true;
  o.noval = true;
  const auto r = yolo::train(yolo::resolve(o));
  EXPECT_EQ(yolo::load_options(r.save_dir + "/opt.yaml").batch_size, 16);
  const yolo::ResultsTable t = yolo::read_results_csv(r.save_dir + "/results.csv");
  ASSERT_EQ(t.rows.size(), 1u);
  for (const char* c : {"train/box_loss", "train/obj_loss", "train/cls_loss"}) {
    EXPECT_TRUE(std::isfinite(t.values(c)[0]) && t.values(c)[0] > 0) << c;
  }
}

TEST(Train, OutOfMemoryMessageNamesTheBatchAndWhatToLower) {
  yolo::Options o;
  o.batch_size = 512;
  o.imgsz = 1280;
  const std::string m = yolo::out_of_memory_message(
      o, 2, "CUDA out of memory. Tried to allocate 20.00 GiB\nmore detail");
  for (const char* s : {"--batch-size 512", "256 images per GPU", "--imgsz 1280",
                        "--batch-size 256)", "last.pt", "Tried to allocate 20.00 GiB"}) {
    EXPECT_NE(m.find(s), std::string::npos) << s << " not in: " << m;
  }
  EXPECT_EQ(m.find("more detail"), std::string::npos) << m;
}

TEST(Train, RunEtaIsThePaceSoFarTimesTheEpochsLeft) {
  const double now = 1'800'000'000;  // the end clock is local time, whatever TZ says
  const auto clock_at = [](double t) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    localtime_r(&tt, &tm);
    char buf[16];
    std::strftime(buf, sizeof(buf), "%H:%M", &tm);
    return std::string(buf);
  };
  // 2 epochs in 20 s: 10 s each, 30 left take 300 s.
  std::string m = yolo::run_eta_line(2, 30, 20, now);
  for (const std::string& s :
       {std::string("2 epochs in 00:20"), std::string("10.0 s each"),
        std::string("30 left: 5.0 min"), "ending about " + clock_at(now + 300)}) {
    EXPECT_NE(m.find(s), std::string::npos) << s << " not in: " << m;
  }
  m = yolo::run_eta_line(1, 4, 6.5, now);  // under a minute left: seconds
  EXPECT_NE(m.find("1 epoch in 00:06 (6.5 s each"), std::string::npos) << m;
  EXPECT_NE(m.find("4 left: 26 s"), std::string::npos) << m;
}

namespace {
// Records the Trainer's events, as a TensorBoard or other logger registered on rank 0 would see
// them.
class RecordingCallback : public yolo::Callback {
 public:
  explicit RecordingCallback(std::vector<std::string>& log) : log_(log) {}
  void on_train_start() override { log_.push_back("start"); }
  void on_train_epoch_start(int epoch) override { log_.push_back("epoch" + std::to_string(epoch)); }
  void on_train_batch_end(const yolo::BatchEvent& e) override {
    if (e.i == 0) log_.push_back("batch0 of " + std::to_string(e.nb));
    EXPECT_EQ(e.mean_loss->numel(), 3);
    EXPECT_EQ(e.images->dim(), 4);
  }
  void on_train_epoch_end(int epoch, const yolo::EpochTiming& t) override {
    log_.push_back("trained " + std::to_string(t.images) + " images");
  }
  void on_val_end(const yolo::ValResult& r, bool final) override {
    log_.push_back(final ? "final val" : "val");
  }
  void on_fit_epoch_end(const yolo::EpochReport& r) override {
    log_.push_back("fit" + std::to_string(r.epoch) + (r.final_epoch ? " final" : ""));
    EXPECT_GT(r.train_loss[0], 0.0);
    EXPECT_GT(r.lr[0], 0.0);
  }
  void on_train_end(int epochs_run, double seconds) override {
    log_.push_back("end " + std::to_string(epochs_run));
  }

 private:
  std::vector<std::string>& log_;
};
}  // namespace

TEST_F(TrainTest, CallbacksSeeTheRunsEventsInOrder) {
  yolo::Options o = options("callbacks", 2);
  yolo::Trainer trainer(yolo::set_up_training(yolo::resolve(o)));
  yolo::add_rank0_callbacks(trainer);
  std::vector<std::string> log;
  trainer.add_callback(std::make_unique<RecordingCallback>(log));
  const yolo::TrainSummary s = trainer.fit();
  EXPECT_EQ(s.epochs_run, 2);
  std::vector<std::string> want = {
      "start",      "epoch0", "batch0 of 8", "trained 64 images", "val",
      "fit0",       "epoch1", "batch0 of 8", "trained 64 images", "val",
      "fit1 final", "end 2"};
  // best.pt (written at every best-so-far fitness, 0 included) is validated last.
  want.push_back("final val");
  EXPECT_EQ(log, want);
  // The built-in rank-0 callbacks ran too: results.csv and last.pt.
  EXPECT_EQ(yolo::read_results_csv(s.save_dir + "/results.csv").rows.size(), 2u);
  EXPECT_TRUE(fs::exists(s.save_dir + "/weights/last.pt"));
}

// As YOLOv5, best.pt is written whenever an epoch's fitness equals the best so far, 0 included: a
// run that finds nothing (its val images hold no objects, so fitness stays exactly 0) still
// leaves a best.pt for val and detect, holding the last such epoch's weights.
TEST_F(TrainTest, BestPtIsWrittenWhenFitnessStaysZero) {
  const fs::path bg = root_ / "background";
  fs::create_directories(bg / "images/val");
  fs::create_directories(bg / "labels/val");
  for (const auto& e : fs::directory_iterator(root_ / "shapes/images/val")) {
    fs::copy_file(e.path(), bg / "images/val" / e.path().filename());
    std::ofstream(bg / "labels/val" / (e.path().stem().string() + ".txt"));  // no objects
  }
  const fs::path yaml = root_ / "background.yaml";
  std::ofstream(yaml) << "train: " << (root_ / "shapes/images/train").string()
                      << "\nval: " << (bg / "images/val").string()
                      << "\nnames: [circle, rectangle, triangle]\n";
  yolo::Options o = options("zero_fitness", 2);
  o.data = yaml.string();
  const yolo::TrainSummary s = yolo::train(yolo::resolve(o));
  EXPECT_EQ(s.epochs_run, 2);
  EXPECT_EQ(s.best_fitness, 0.0);
  const std::string best = s.save_dir + "/weights/best.pt";
  ASSERT_TRUE(fs::exists(best));
  const auto a = yolo::load_checkpoint(best).model;
  const auto b = yolo::load_checkpoint(s.save_dir + "/weights/last.pt").model;
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, t] : a) EXPECT_TRUE(torch::equal(t, b.at(k))) << k;
}

// LibTorch 1.13 has another warning-handler API and no CUDA build here.
#if TORCH_VERSION_MAJOR >= 2
// On a GPU a training step never waits for the device: one step of the real Trainer (loader,
// copy, AMP forward, loss, backward, unscale, clip, fused SGD, EMA, running loss) runs under
// CUDA's sync-debug mode set to warn, and every synchronising call the training thread makes is
// collected with the stack that made it, so one run names them all.
class SyncDebugWindow : public yolo::Callback {
 public:
  // Keeps the ATen operator frames (which op waited) and the frames outside LibTorch (who called
  // it); drops LibTorch's own.
  class Collector : public c10::WarningHandler {
   public:
    void process(const c10::Warning& w) override {
      if (w.msg().find("synchronizing CUDA operation") == std::string::npos) return;
      std::istringstream frames(c10::get_backtrace(1, 64));
      std::string line, kept;
      for (int n = 0; std::getline(frames, line) && n < 24;) {
        if (line.find("_ops::") == std::string::npos &&
            line.find("/torch/lib/") != std::string::npos)
          continue;
        kept += line + "\n";
        ++n;
      }
      traces.insert(kept);
    }
    std::set<std::string> traces;
  };

  void on_train_batch_end(const yolo::BatchEvent& e) override {
    if (e.i == 1) {  // step 2 runs under it
      previous_ = c10::WarningUtils::get_warning_handler();
      c10::WarningUtils::set_warning_handler(&collector);
      yolo::set_cuda_sync_debug_warn(true);
    }
    if (e.i == 2) {
      close();
      checked = true;
      yolo::request_stop();
    }
  }
  void close() {
    yolo::set_cuda_sync_debug_warn(false);
    if (previous_) c10::WarningUtils::set_warning_handler(previous_);
    previous_ = nullptr;
  }
  Collector collector;
  bool checked = false;

 private:
  c10::WarningHandler* previous_ = nullptr;
};

// One family per instance, each with the optimizer its runs use: YOLOv5 with SGD (fused), YOLO11
// with --optimizer auto (AdamW, fused, on a short run) and YOLO26 with MuSGD (foreach kernels and
// Newton-Schulz), each under AMP with its own loss (anchors; task-aligned assignment, CIoU and
// DFL; both end-to-end branches with L1 distances).
struct Family {
  const char* name;
  const char* cfg;
  const char* optimizer;
};

class TrainFamilyTest : public TrainTest, public ::testing::WithParamInterface<Family> {};

TEST_P(TrainFamilyTest, CudaStepHasNoSynchronisingCall) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Family f = GetParam();
  yolo::Options o = options(std::string("sync_debug_") + f.name, 1);
  o.cfg = f.cfg;
  o.optimizer = f.optimizer;
  o.device = "0";
  o.noval = true;
  yolo::Trainer trainer(yolo::set_up_training(yolo::resolve(o)));
  ASSERT_TRUE(trainer.setup().amp);
  ASSERT_GE(trainer.setup().loop.loss_read_interval, 4);  // step 2 does not read the loss
  auto window = std::make_unique<SyncDebugWindow>();
  SyncDebugWindow* w = window.get();
  trainer.add_callback(std::move(window));
  try {
    trainer.fit();
  } catch (const yolo::TrainingInterrupted&) {
  } catch (const std::exception& e) {
    w->close();
    FAIL() << "training failed: " << e.what();
  }
  w->close();
  EXPECT_TRUE(w->checked);
  EXPECT_TRUE(w->collector.traces.empty())
      << f.name << ": " << w->collector.traces.size() << " synchronising call(s) in a step:\n"
      << [&] {
           std::string all;
           for (const auto& t : w->collector.traces) all += "---\n" + t;
           return all;
         }();
}

INSTANTIATE_TEST_SUITE_P(Families, TrainFamilyTest,
                         ::testing::Values(Family{"yolov5n", "yolov5n.yaml", "SGD"},
                                           Family{"yolo11n", "yolo11n.yaml", "auto"},
                                           Family{"yolo26n", "yolo26n.yaml", "MuSGD"}),
                         [](const ::testing::TestParamInfo<Family>& i) { return i.param.name; });
#else
TEST_F(TrainTest, CudaStepHasNoSynchronisingCall) {
  GTEST_SKIP() << "LibTorch 1.13: CPU-only build";
}
#endif

namespace {

// The run's own batches, with a NaN box centre in the targets of the steps `poisoned` picks
// (counted over the run): that step's loss is not finite while the forward pass, and so
// BatchNorm's statistics, stay finite, as when a float16 loss overflows. No validation.
void poison_steps(yolo::TrainSetup& s, std::function<bool(int64_t)> poisoned) {
  yolo::DataLoader* loader = s.train_loader.get();
  s.val_loader.reset();
  struct Position {
    int64_t epoch = -1, step = 0;
    bool in_epoch = false;
  };
  auto at = std::make_shared<Position>();
  s.batch_source = [loader, at, poisoned]() -> std::optional<yolo::Batch> {
    if (!at->in_epoch) loader->start_epoch(++at->epoch);
    at->in_epoch = true;
    std::optional<yolo::Batch> b = loader->next();
    if (!b) {
      at->in_epoch = false;
      return b;
    }
    if (poisoned(at->step++) && b->targets.size(0) > 0) {
      b->targets.select(1, 2).fill_(std::numeric_limits<float>::quiet_NaN());
    }
    return b;
  };
}

class EpochLosses : public yolo::Callback {
 public:
  explicit EpochLosses(std::vector<std::array<double, 3>>& out) : out_(out) {}
  void on_fit_epoch_end(const yolo::EpochReport& r) override { out_.push_back(r.train_loss); }

 private:
  std::vector<std::array<double, 3>>& out_;
};

bool all_finite(const yolo::DetectionModel& m) {
  for (const auto& p : m->parameters()) {
    if (!torch::isfinite(p).all().item<bool>()) return false;
  }
  return true;
}

std::string fit_error(yolo::Trainer& trainer) {
  try {
    trainer.fit();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// One overflowed step under AMP on `device`: the scaler skips it and training goes on with
// finite weights and a finite epoch loss.
void expect_nonfinite_step_skipped(yolo::Options o) {
  yolo::TrainSetup s = yolo::set_up_training(yolo::resolve(o));
  s.amp = true;  // on the CPU: the scaler without autocast, the same skip on the host
  poison_steps(s, [](int64_t step) { return step == 3; });
  yolo::Trainer trainer(std::move(s));
  std::vector<std::array<double, 3>> losses;
  trainer.add_callback(std::make_unique<EpochLosses>(losses));
  const std::string error = fit_error(trainer);
  EXPECT_EQ(error, "") << "one non-finite step ended the run";
  ASSERT_EQ(losses.size(), 1u);
  for (double l : losses[0]) EXPECT_TRUE(std::isfinite(l) && l > 0) << l;
  EXPECT_TRUE(all_finite(trainer.setup().model)) << "the non-finite step reached the weights";
}

}  // namespace

TEST_F(TrainTest, NonFiniteStepUnderAmpIsSkippedAndTrainingGoesOn) {
  expect_nonfinite_step_skipped(options("amp_skip", 1));
}

TEST_F(TrainTest, CudaNonFiniteStepUnderAmpIsSkippedAndTrainingGoesOn) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  yolo::Options o = options("amp_skip_cuda", 1);
  o.device = "0";
  expect_nonfinite_step_skipped(o);
}

// Under AMP the run ends once the loss has been non-finite for 16 batches in a row (over epoch
// boundaries), naming where; without AMP nothing skips the step, so the first one ends it.
TEST_F(TrainTest, LossThatStaysNonFiniteEndsTheRun) {
  yolo::TrainSetup s = yolo::set_up_training(yolo::resolve(options("amp_nonfinite", 3)));
  s.amp = true;
  poison_steps(s, [](int64_t step) { return step >= 2; });
  yolo::Trainer amp(std::move(s));
  const std::string error = fit_error(amp);
  EXPECT_NE(error.find("the training loss is not finite at epoch 2, batch 1 (16 batches in a row"),
            std::string::npos)
      << error;

  yolo::TrainSetup plain = yolo::set_up_training(yolo::resolve(options("plain_nonfinite", 1)));
  ASSERT_FALSE(plain.amp);
  poison_steps(plain, [](int64_t step) { return step == 3; });
  yolo::Trainer trainer(std::move(plain));
  const std::string first = fit_error(trainer);
  EXPECT_NE(first.find("the training loss is not finite at epoch 0, batch 3 (check the data"),
            std::string::npos)
      << first;
}

// The public API (include/yolo/train.h): the program's flags in, the run's events out.
TEST_F(TrainTest, PublicTrainTakesTheProgramsFlagsAndReportsEpochsAndCheckpoints) {
  const yolo::TrainSettings settings =
      yolo::TrainSettings::from_args({"--cfg",
                                      "yolov5n.yaml",
                                      "--data",
                                      (root_ / "shapes.yaml").string(),
                                      "--epochs",
                                      "2",
                                      "--batch-size",
                                      "8",
                                      "--imgsz",
                                      "128",
                                      "--workers",
                                      "2",
                                      "--device",
                                      "cpu",
                                      "--project",
                                      (root_ / "runs").string(),
                                      "--name",
                                      "public_api",
                                      "--noplots",
                                      "--seed",
                                      "3"});
  EXPECT_EQ(settings.epochs(), 2);
  EXPECT_EQ(settings.batch_size(), 8);
  EXPECT_EQ(fs::path(settings.cfg()).filename(), "yolov5n.yaml");
  EXPECT_TRUE(fs::is_regular_file(settings.cfg()));  // the bare name was found
  std::string started;
  std::vector<yolo::EpochMetrics> epochs;
  std::vector<yolo::CheckpointSaved> saves;
  std::vector<std::string> ended;
  yolo::TrainCallbacks cb;
  cb.on_train_start = [&](const std::string& dir) { started = dir; };
  cb.on_epoch_end = [&](const yolo::EpochMetrics& m) { epochs.push_back(m); };
  cb.on_checkpoint_saved = [&](const yolo::CheckpointSaved& c) {
    for (const auto& f : c.files) EXPECT_TRUE(fs::is_regular_file(f)) << f << " not on disk yet";
    saves.push_back(c);
  };
  cb.on_train_end = [&](const yolo::TrainResult& r) { ended.push_back(r.save_dir); };
  const yolo::TrainResult r = yolo::train(settings, cb);

  EXPECT_EQ(started, r.save_dir);
  EXPECT_EQ(ended, std::vector<std::string>{r.save_dir});
  EXPECT_EQ(r.epochs_run, 2);
  EXPECT_TRUE(fs::is_regular_file(r.best));
  EXPECT_TRUE(fs::is_regular_file(r.last));
  // Each epoch's metrics are its row of results.csv.
  const yolo::ResultsTable csv = yolo::read_results_csv(r.save_dir + "/results.csv");
  ASSERT_EQ(epochs.size(), 2u);
  ASSERT_EQ(csv.rows.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(epochs[e].epoch, static_cast<int>(e));
    EXPECT_EQ(epochs[e].epochs, 2);
    EXPECT_NEAR(epochs[e].map50, csv.values("metrics/mAP_0.5")[e], 1e-4);
    EXPECT_NEAR(epochs[e].box_loss, csv.values("train/box_loss")[e], 1e-4);
    EXPECT_NEAR(epochs[e].obj_loss, csv.values("train/obj_loss")[e], 1e-4);
    EXPECT_NEAR(epochs[e].val_cls_loss, csv.values("val/cls_loss")[e], 1e-4);
    EXPECT_EQ(epochs[e].loss_names,
              (std::array<std::string, 3>{"box_loss", "obj_loss", "cls_loss"}));
  }
  // last.pt every epoch, on disk when reported (checked above).
  ASSERT_EQ(saves.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(saves[e].epoch, static_cast<int>(e));
    EXPECT_EQ(saves[e].files.front(), r.last);
  }
}

// An anchor-free model reports its own loss terms by name (box, cls, dfl), as results.csv does.
TEST_F(TrainTest, PublicTrainReportsTheAnchorFreeLossTermsByName) {
  const yolo::TrainSettings settings = yolo::TrainSettings::from_args(
      {"--cfg", "yolov8n.yaml", "--data", (root_ / "shapes.yaml").string(), "--epochs", "1",
       "--batch-size", "8", "--imgsz", "64", "--workers", "0", "--device", "cpu", "--project",
       (root_ / "runs").string(), "--name", "public_api_af", "--noplots"});
  std::vector<yolo::EpochMetrics> epochs;
  yolo::TrainCallbacks cb;
  cb.on_epoch_end = [&](const yolo::EpochMetrics& m) { epochs.push_back(m); };
  const yolo::TrainResult r = yolo::train(settings, cb);
  const yolo::ResultsTable csv = yolo::read_results_csv(r.save_dir + "/results.csv");
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].loss_names, (std::array<std::string, 3>{"box_loss", "cls_loss", "dfl_loss"}));
  EXPECT_NEAR(epochs[0].cls_loss, csv.values("train/cls_loss")[0], 1e-4);
  EXPECT_NEAR(epochs[0].dfl_loss, csv.values("train/dfl_loss")[0], 1e-4);
  EXPECT_NEAR(epochs[0].val_dfl_loss, csv.values("val/dfl_loss")[0], 1e-4);
  EXPECT_GT(epochs[0].dfl_loss, 0);
  EXPECT_EQ(epochs[0].obj_loss, 0);
}

TEST(TrainApi, TheProgramsOwnFlagsAndBadValuesAreRefusedByName) {
  auto message = [](const std::vector<std::string>& args) {
    try {
      yolo::TrainSettings::from_args(args);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({"--evolve", "3"}).find("--evolve"), std::string::npos);
  EXPECT_NE(message({"--nproc-per-node", "2"}).find("--nproc-per-node"), std::string::npos);
  EXPECT_NE(message({"--epochs", "abc"}).find("--epochs"), std::string::npos);
  EXPECT_NE(message({"--cfg", "no_such_model.yaml"}).find("--cfg"), std::string::npos);
}

// The public detector (include/yolo/detector.h) on a trained checkpoint.
TEST_F(TrainTest, DetectorFindsBoxesInsideTheImageAndBatchesAsOneByOne) {
  const yolo::TrainSummary s = yolo::train(yolo::resolve(options("detector", 1)));
  const std::string weights = s.save_dir + "/weights/best.pt";
  yolo::DetectorOptions o;
  o.device = "cpu";
  o.imgsz = 128;
  o.conf_thres = 0.001f;
  yolo::Detector det(weights, o);
  EXPECT_EQ(det.names(), (std::vector<std::string>{"circle", "rectangle", "triangle"}));
  EXPECT_EQ(det.stride(), 32);
  EXPECT_EQ(det.device(), "cpu");
  const cv::Mat im = cv::imread((root_ / "shapes/images/val/val_00000.png").string());
  ASSERT_FALSE(im.empty());
  const cv::Size input = det.input_size(im.size());  // the long side at imgsz, the other padded
  EXPECT_EQ(std::max(input.width, input.height), 128);
  EXPECT_EQ(std::min(input.width, input.height) % 32, 0);
  const std::vector<yolo::Detection> one = det.detect(im);
  ASSERT_FALSE(one.empty());
  for (size_t k = 0; k < one.size(); ++k) {
    const yolo::Detection& d = one[k];
    EXPECT_LE(0, d.x1);
    EXPECT_LT(d.x1, d.x2);
    EXPECT_LE(d.x2, im.cols);
    EXPECT_LE(0, d.y1);
    EXPECT_LT(d.y1, d.y2);
    EXPECT_LE(d.y2, im.rows);
    EXPECT_GE(d.confidence, o.conf_thres);
    EXPECT_TRUE(d.class_id >= 0 && d.class_id < 3);
    if (k) {
      EXPECT_LE(d.confidence, one[k - 1].confidence);  // most confident first
    }
  }
  const auto batch = det.detect(std::vector<cv::Mat>{im, im});
  ASSERT_EQ(batch.size(), 2u);
  for (const auto& b : batch) {
    ASSERT_EQ(b.size(), one.size());
    for (size_t k = 0; k < b.size(); ++k) {
      EXPECT_EQ(b[k].class_id, one[k].class_id);
      EXPECT_NEAR(b[k].x1, one[k].x1, 1e-2);
      EXPECT_NEAR(b[k].y2, one[k].y2, 1e-2);
      EXPECT_NEAR(b[k].confidence, one[k].confidence, 1e-4);
    }
  }
  // Class filters and bad settings.
  o.classes = {1};
  for (const auto& d : yolo::Detector(weights, o).detect(im)) EXPECT_EQ(d.class_id, 1);
  auto message = [&](const yolo::DetectorOptions& bad, const std::string& path) {
    try {
      yolo::Detector d(path, bad);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  yolo::DetectorOptions bad = o;
  bad.conf_thres = 2;
  EXPECT_NE(message(bad, weights).find("conf_thres"), std::string::npos);
  EXPECT_NE(message(o, weights + ".missing").find(weights + ".missing"), std::string::npos);
  bad = o;
  bad.half = true;
  EXPECT_NE(message(bad, weights).find("CUDA"), std::string::npos);
  EXPECT_THROW(det.detect(cv::Mat()), std::runtime_error);
}

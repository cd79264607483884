// CheckpointWriter: the background writes are the synchronous save's bytes, taken from a snapshot
// the next steps cannot change; flush and the destructor wait for them; a failed write surfaces
// on the caller's next call naming the file; save() does not wait for a running write. The slow
// writes are sinks held on a gate, so the tests assert order and state, never durations.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <thread>

#include "models/weights.h"
#include "models/yolo.h"
#include "utils/core/fs_atomic.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/paths.h"
#include "utils/core/runtime/cuda_env.h"
#include "utils/engine/checkpoint_writer.h"
#include "utils/engine/optim.h"
#include "utils/engine/train_callbacks.h"

namespace fs = std::filesystem;

namespace {

class CheckpointWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("yolo_ckpt_writer_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A training state as Trainer::make_checkpoint builds it: a yolov5n's weights (channels-last, as
// the CPU trains), EMA weights and an SGD state after one step.
struct State {
  yolo::DetectionModel model{nullptr}, ema{nullptr};
  std::unique_ptr<torch::optim::Optimizer> opt;

  State() {
    torch::manual_seed(0);
    const std::string cfg = yolo::project_root() + "/configs/models/yolov5n.yaml";
    model = yolo::build_model(cfg, 3);
    ema = yolo::build_model(cfg, 3);
    for (auto& p : model->parameters()) {
      if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
    }
    opt = yolo::make_optimizer("SGD", yolo::split_param_groups(*model), 0.01, 0.937, 5e-4);
    model->train();
    const auto out = model->forward_raw(torch::rand({1, 3, 64, 64}));
    at::Tensor loss = torch::zeros({});
    for (const auto& o : out) loss = loss + o.mean();
    loss.backward();
    opt->step();
  }

  yolo::Checkpoint checkpoint() const {
    yolo::Checkpoint ck;
    ck.epoch = 3;
    ck.best_fitness = 0.25;
    ck.model = yolo::state_dict(*ema);
    ck.train_model = yolo::state_dict(*model);
    ck.last_opt_step = 42;
    ck.optimizer = yolo::optimizer_state(*opt, "SGD");
    ck.ema_updates = 7;
    ck.opt = "epochs: 10\n";
    ck.hyp = "lr0: 0.01\n";
    ck.date = "2024-01-02T03:04:05";
    return ck;
  }

  // Changes every weight and optimizer buffer in place, as the next training steps would.
  void train_on() {
    torch::NoGradGuard no_grad;
    for (auto& t : model->parameters()) t.add_(1);
    for (auto& t : ema->parameters()) t.add_(1);
    opt->step();  // momentum buffers, in place
  }
};

// A sink that records the paths it wrote and, once closed, holds every write at its start until
// opened: the writer thread is then busy for as long as the test wants.
class GatedSink {
 public:
  yolo::CheckpointWriter::Sink sink(const std::string& fail_path = "") {
    return [this, fail_path](const std::string& path, const std::string& bytes) {
      std::unique_lock<std::mutex> lk(mu_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lk, [&] { return open_; });
      if (path == fail_path) throw std::runtime_error(path + ": write failed: disk full");
      yolo::write_file_atomic(path, bytes);
      written_.push_back(path);
    };
  }
  void close() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = false;
  }
  void open() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait_entered(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return entered_ >= n; });
  }
  std::vector<std::string> written() {
    std::lock_guard<std::mutex> lk(mu_);
    return written_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int entered_ = 0;
  std::vector<std::string> written_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_F(CheckpointWriterTest, WritesTheBytesOfASynchronousSave) {
  State s;
  const yolo::Checkpoint ck = s.checkpoint();
  yolo::save_checkpoint(ck, path("sync.pt"));
  yolo::CheckpointWriter w;
  w.save(ck, {path("last.pt"), path("best.pt")});
  w.flush();
  const std::string want = slurp(path("sync.pt"));
  ASSERT_GT(want.size(), 1000000u);
  EXPECT_TRUE(slurp(path("last.pt")) == want);
  EXPECT_TRUE(slurp(path("best.pt")) == want);
  // A stripped checkpoint (no optimizer, no train_model) too.
  yolo::Checkpoint stripped = ck;
  stripped.optimizer = c10::IValue();
  yolo::save_checkpoint(stripped, path("sync_stripped.pt"));
  w.save(stripped, {path("stripped.pt")});
  w.flush();
  EXPECT_TRUE(slurp(path("stripped.pt")) == slurp(path("sync_stripped.pt")));
}

TEST_F(CheckpointWriterTest, WritesTheStateOfTheSaveNotOfLaterSteps) {
  State s;
  const yolo::Checkpoint ck = s.checkpoint();
  yolo::save_checkpoint(ck, path("sync.pt"));
  GatedSink gate;
  yolo::CheckpointWriter w(gate.sink());
  gate.close();
  w.save(ck, {path("first.pt")});
  gate.wait_entered(1);  // the writer is busy: the next save is serialised after train_on()
  w.save(ck, {path("last.pt")});
  s.train_on();
  gate.open();
  w.flush();
  EXPECT_TRUE(slurp(path("last.pt")) == slurp(path("sync.pt")));
  const yolo::Checkpoint back = yolo::load_checkpoint(path("last.pt"));
  for (const auto& p : s.model->named_parameters()) {
    EXPECT_FALSE(torch::equal(back.train_model.at(p.key()), p.value()))
        << p.key() << " did not change, so this test shows nothing";
  }
}

TEST_F(CheckpointWriterTest, SaveDoesNotWaitForARunningWrite) {
  State s;
  const yolo::Checkpoint ck = s.checkpoint();
  GatedSink gate;
  yolo::CheckpointWriter w(gate.sink());
  gate.close();
  w.save(ck, {path("a.pt")});  // returns with the write held open
  gate.wait_entered(1);
  w.save(ck, {path("b.pt")});  // queued behind it, returns too
  EXPECT_EQ(w.pending(), 2u);
  EXPECT_TRUE(gate.written().empty());
  EXPECT_FALSE(fs::exists(path("a.pt")));
  // A third save while one runs and one waits waits for the running one (two snapshots at most).
  auto third = std::async(std::launch::async, [&] { w.save(ck, {path("c.pt")}); });
  EXPECT_NE(third.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  EXPECT_TRUE(gate.written().empty());
  gate.open();
  third.get();
  w.flush();
  EXPECT_EQ(w.pending(), 0u);
  EXPECT_EQ(gate.written(), (std::vector<std::string>{path("a.pt"), path("b.pt"), path("c.pt")}));
}

TEST_F(CheckpointWriterTest, FlushAndTheDestructorWaitForTheWrites) {
  State s;
  const yolo::Checkpoint ck = s.checkpoint();
  GatedSink gate;
  std::thread opener;
  {
    yolo::CheckpointWriter w(gate.sink());
    gate.close();
    w.save(ck, {path("a.pt")});
    auto flushed = std::async(std::launch::async, [&] { w.flush(); });
    gate.wait_entered(1);
    EXPECT_NE(flushed.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
    gate.open();
    flushed.get();
    EXPECT_EQ(gate.written(), std::vector<std::string>{path("a.pt")});
    gate.close();
    w.save(ck, {path("b.pt"), path("c.pt")});
    gate.wait_entered(2);  // b.pt's write is held
    opener = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the destructor starts first
      gate.open();
    });
  }  // the destructor finishes b.pt and c.pt
  opener.join();
  EXPECT_EQ(gate.written(), (std::vector<std::string>{path("a.pt"), path("b.pt"), path("c.pt")}));
  EXPECT_EQ(yolo::load_checkpoint(path("c.pt")).epoch, 3);
}

TEST_F(CheckpointWriterTest, AFailedWriteSurfacesOnTheNextCallNamingTheFile) {
  State s;
  const yolo::Checkpoint ck = s.checkpoint();
  const std::string missing = path("gone/last.pt");  // the folder does not exist
  yolo::CheckpointWriter w;
  w.save(ck, {missing, path("best.pt")});
  const std::string e = error_of([&] { w.flush(); });
  EXPECT_NE(e.find(missing), std::string::npos) << e;
  EXPECT_NE(e.find("cannot create a temporary file"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(path("best.pt"))) << "written after a failed write of the same save";
  // Reported once; the writer goes on working.
  EXPECT_NO_THROW(w.check());
  w.save(ck, {path("ok.pt")});
  EXPECT_NO_THROW(w.flush());
  EXPECT_TRUE(fs::exists(path("ok.pt")));
}

TEST_F(CheckpointWriterTest, AFailedWriteStopsTheNextSaveAndDropsTheQueue) {
  State s;
  const yolo::Checkpoint ck = s.checkpoint();
  GatedSink gate;
  yolo::CheckpointWriter w(gate.sink(path("last.pt")));
  gate.close();
  w.save(ck, {path("last.pt")});
  gate.wait_entered(1);
  w.save(ck, {path("queued.pt")});
  gate.open();
  while (w.pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The next save, not a flush, reports it, and takes no new snapshot.
  const std::string e = error_of([&] { w.save(ck, {path("next.pt")}); });
  EXPECT_NE(e.find(path("last.pt") + ": write failed: disk full"), std::string::npos) << e;
  w.flush();
  EXPECT_TRUE(gate.written().empty());
  EXPECT_FALSE(fs::exists(path("queued.pt")));
  EXPECT_FALSE(fs::exists(path("next.pt")));
}

TEST_F(CheckpointWriterTest, AnUnreportedFailureIsLoggedByTheDestructor) {
  State s;
  testing::internal::CaptureStderr();
  {
    yolo::CheckpointWriter w;
    w.save(s.checkpoint(), {path("gone/last.pt")});
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("checkpoint not saved: " + path("gone/last.pt")), std::string::npos) << err;
}

// The callback: an epoch's save returns with the write pending; a stop and the end wait for it
// (the end before stripping the optimizer).
TEST_F(CheckpointWriterTest, CheckpointerWaitsAtAStopAndAtTheEnd) {
  State s;
  yolo::RunPaths paths{dir_.string(), dir_.string(), path("last.pt"), path("best.pt")};
  GatedSink gate;
  const auto make = [&](int epoch) {
    yolo::Checkpoint c = s.checkpoint();
    c.epoch = epoch;
    return c;
  };
  yolo::Checkpointer cp(paths, make, /*nosave=*/false, /*save_period=*/0, gate.sink());
  yolo::EpochReport r;
  r.is_best = true;
  gate.close();
  cp.on_fit_epoch_end(r);
  gate.wait_entered(1);
  EXPECT_TRUE(gate.written().empty());
  auto stopped = std::async(std::launch::async, [&] { cp.on_interrupt(0, true); });
  EXPECT_NE(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  gate.open();
  stopped.get();
  EXPECT_EQ(gate.written(), (std::vector<std::string>{path("last.pt"), path("best.pt")}));
  r.epoch = 1;
  gate.close();
  cp.on_fit_epoch_end(r);
  gate.wait_entered(3);
  auto ended = std::async(std::launch::async, [&] { cp.on_train_end(2, 1.0); });
  EXPECT_NE(ended.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  gate.open();
  ended.get();
  for (const std::string& f : {path("last.pt"), path("best.pt")}) {
    const yolo::Checkpoint c = yolo::load_checkpoint(f);
    EXPECT_EQ(c.epoch, 1) << f;
    EXPECT_FALSE(c.has_optimizer()) << f << " was not stripped after its write";
  }
}

// On a GPU the snapshot is a copy queued on the stream: the file holds the values the weights had
// when save() was called, although a long kernel was still producing them then and an in-place
// update was queued right after.
TEST_F(CheckpointWriterTest, CudaFileHoldsTheValuesAtSaveTimeDespiteALongKernelAndAnUpdate) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  State s;
  s.model->to(cuda);
  s.ema->to(cuda);
  const at::Tensor big = torch::rand({4096, 4096}, cuda);
  torch::cuda::synchronize();
  at::Tensor p = s.ema->parameters().front();
  at::Tensor at_save;
  {
    torch::NoGradGuard no_grad;
    at::Tensor x = big;
    for (int k = 0; k < 16; ++k) x = torch::mm(x, big).div_(4096);  // tens of ms of GPU work
    p.add_(x.mean());
    at_save = p.clone();  // queued after the add, before the update: the value at save time
  }
  yolo::CheckpointWriter w;
  w.save(s.checkpoint(), {path("gpu.pt")});
  {
    torch::NoGradGuard no_grad;
    p.add_(1);
  }
  w.flush();
  const yolo::Checkpoint back = yolo::load_checkpoint(path("gpu.pt"));
  const at::Tensor saved = back.model.at(s.ema->named_parameters().begin()->key());
  EXPECT_TRUE(torch::equal(saved, at_save.cpu()));
  EXPECT_FALSE(torch::equal(saved, p.detach().cpu()));
}

// The writer thread makes the state's GPU its current device, so that its event queries and the
// release of the pinned copies open no CUDA context on GPU 0 (a second GPU shows it).
TEST_F(CheckpointWriterTest, CudaWriterThreadWorksOnTheStatesDevice) {
  if (!torch::cuda::is_available() || torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "needs 2 CUDA devices";
  }
  const torch::Device gpu1(torch::kCUDA, 1);
  yolo::set_current_cuda_device(gpu1);
  State s;
  s.model->to(gpu1);
  s.ema->to(gpu1);
  int seen = -1;
  {
    yolo::CheckpointWriter w([&](const std::string& file, const std::string& bytes) {
      seen = c10::impl::getDeviceGuardImpl(c10::kCUDA)->getDevice().index();
      yolo::write_file_atomic(file, bytes);
    });
    w.save(s.checkpoint(), {path("gpu1.pt")});
    w.flush();
  }
  yolo::set_current_cuda_device(torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(seen, 1);
}

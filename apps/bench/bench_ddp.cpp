// DDP communication benchmark. Run under torchrun, e.g.
//   torchrun --no_python -r 1 -t 1 --nproc_per_node=2 build/bin/bench_ddp yolov5n.yaml 320 8 10
// Arguments: model YAML (bare names looked up in configs/models), image size, images per rank,
// timed steps. Each step is forward + loss + backward + optimizer on random images with random
// boxes, as in training with --sync-bn off. Rank 0 prints the median step time with gradient
// all-reduce, the time finish() waits for it, the step time without it (DDP's no_sync), and shares.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "models/yolo.h"
#include "utils/core/app_main.h"
#include "utils/core/errors.h"
#include "utils/core/paths.h"
#include "utils/core/stopwatch.h"
#include "utils/distributed/distributed.h"
#include "utils/distributed/grad_sync.h"
#include "utils/engine/hyp.h"
#include "utils/engine/optim.h"
#include "utils/eval/loss.h"

namespace {

int parse_int(const char* s, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end || v < 1) throw yolo::UsageError(std::string(what) + " must be a positive integer");
  return static_cast<int>(v);
}

int run(int argc, char** argv) {
  using namespace yolo;
  const std::string cfg =
      resolve_config(argc > 1 ? argv[1] : "yolov5n.yaml", ConfigKind::kModel, "model");
  const int imgsz = argc > 2 ? parse_int(argv[2], "image size") : 320;
  const int per_rank = argc > 3 ? parse_int(argv[3], "images per rank") : 8;
  const int steps = argc > 4 ? parse_int(argv[4], "steps") : 10;
  const DistEnv env = read_dist_env();
  if (!env.distributed()) throw UsageError("run bench_ddp under torchrun (see its header)");
  if (const char* t = std::getenv("OMP_NUM_THREADS")) torch::set_num_threads(std::atoi(t));
  auto pg = init_process_group(env, "gloo", std::chrono::seconds(120));
  torch::manual_seed(1 + env.rank);
  DetectionModel model = build_model(cfg, 80);
  model->train();
  std::vector<at::Tensor> state = model->parameters();
  for (const auto& b : model->buffers()) state.push_back(b);
  broadcast_coalesced(*pg, state, 0);
  const Hyp hyp = load_hyp(project_root() + "/hyp/hyp.scratch-low.yaml");
  ComputeLoss loss(scale_loss_gains(hyp, 3, 80, imgsz, 0.0), 80, model->detect()->anchors);
  auto opt = make_optimizer("SGD", split_param_groups(*model), 0.01, 0.937, 5e-4);
  GradSync sync(pg, model->parameters());
  const at::Tensor images = torch::rand({per_rank, 3, imgsz, imgsz});
  std::vector<at::Tensor> rows;
  for (int i = 0; i < per_rank; ++i) {
    rows.push_back(torch::cat({torch::full({4, 1}, static_cast<float>(i)),
                               torch::randint(0, 80, {4, 1}).to(torch::kFloat),
                               torch::rand({4, 2}) * 0.6 + 0.2, torch::rand({4, 2}) * 0.3 + 0.05},
                              1));
  }
  const at::Tensor targets = torch::cat(rows);

  // One step; `reduce` false skips the all-reduce (no_sync). Returns seconds (slowest rank).
  auto step = [&](bool reduce) {
    pg->barrier();
    const yolo::Stopwatch t0;
    sync.set_sync(reduce);
    (loss(model->forward(images).raw, targets).loss * pg->size()).backward();
    if (reduce) sync.finish();
    opt->step();
    opt->zero_grad();
    pg->barrier();
    return t0.seconds();
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  step(true);  // warm-up
  step(false);
  // Interleaved, so load from elsewhere on the machine hits both kinds alike; medians.
  std::vector<double> t_sync, t_nosync, t_wait;
  for (int s = 0; s < steps; ++s) {
    const double w0 = sync.stats().wait_seconds;
    t_sync.push_back(step(true));
    t_wait.push_back(sync.stats().wait_seconds - w0);
    t_nosync.push_back(step(false));
  }
  const double with_sync = median(t_sync), without = median(t_nosync), wait = median(t_wait);
  if (env.rank == 0) {
    std::printf(
        "bench_ddp %s imgsz %d, %d ranks x %d images, %d steps, %zu buckets, %.1f MB gradients\n"
        "  step with all-reduce   %8.1f ms\n"
        "  step without (no_sync) %8.1f ms\n"
        "  all-reduce cost        %8.1f ms per step (%.1f%% of the step)\n"
        "  waited in finish()     %8.1f ms per step (%.1f%% of the step; the rest overlapped "
        "backward)\n",
        cfg.substr(cfg.find_last_of('/') + 1).c_str(), imgsz, pg->size(), per_rank, steps,
        sync.num_buckets(), sync.stats().bytes / 1e6, with_sync * 1e3, without * 1e3,
        (with_sync - without) * 1e3, 100 * (with_sync - without) / with_sync, wait * 1e3,
        100 * wait / with_sync);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return yolo::run_app("bench_ddp", [&] { return run(argc, argv); });
}

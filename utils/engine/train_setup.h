#pragma once
// Everything a training run is made of, built once before the first epoch: the options in force
// (a --resume's own), the process group, the run dir, data, model, EMA, optimizer and schedule,
// loaders, DDP/DataParallel wrappers and the loss. set_up_training() builds it in YOLOv5's order
// (the order matters: each step draws from the same seeded random generator).
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset_config.h"
#include "data/loader.h"
#include "models/yolo.h"
#include "utils/core/run_lock.h"
#include "utils/core/runtime/device.h"
#include "utils/distributed/ddp_setup.h"
#include "utils/engine/cpu_resources.h"
#include "utils/engine/hyp.h"
#include "utils/engine/run_paths.h"
#include "utils/engine/train_config.h"

namespace yolo {

class DetectionLoss;
class DataParallel;
class GradSync;
class ModelEMA;
class YoloDataset;
struct WeightsFile;

constexpr int kNominalBatch = 64;  // YOLOv5's nbs: gradients accumulate to this batch

// The learning-rate schedule and gradient accumulation (YOLOv5's warmup and lf).
struct Schedule {
  std::function<double(double)> lf;  // epoch -> factor of lr0
  double lr0 = 0.01;
  int batch_size = 16;       // total over the ranks
  int accumulate = 1;        // batches per optimizer step after warmup
  double warmup_epochs = 3;  // in epochs (the batches: the family's WarmupRule)
  double warmup_bias_lr = 0.1, warmup_momentum = 0.8, momentum = 0.937;
};

// Where a resumed run continues from; a fresh run starts at epoch 0.
struct ResumePoint {
  int start_epoch = 0;
  int64_t last_opt_step = -1;
  double best_fitness = 0.0;
};

// What the loop reads of the options.
// Steps between host reads of the running loss on a GPU (see LoopConfig).
constexpr int kGpuLossReadInterval = 10;

struct LoopConfig {
  int epochs = 0;
  int patience = 100;  // epochs without improvement before early stopping
  int seed = 0;        // multi-scale sizes and image-weight sampling are drawn from it
  bool noval = false, noplots = false, multi_scale = false, image_weights = false;
  std::string optimizer = "SGD";  // its name keys the saved optimizer state
  // Steps between host reads of the running loss (progress, non-finite check, the stop vote
  // under DDP): 1 on the CPU, where a read costs nothing; more on a GPU, where each read waits
  // for the queued work. The epoch's last step always reads.
  int loss_read_interval = 1;
};

struct TrainSetup {
  TrainSetup();
  TrainSetup(TrainSetup&&) noexcept;
  TrainSetup& operator=(TrainSetup&&) noexcept;
  ~TrainSetup();

  Options opt;  // the options in force, with the files resolved (for opt.yaml and callbacks)
  LoopConfig loop;
  DeviceSelection dev;
  DistContext dist;
  Hyp hyp;
  std::string opt_text, hyp_text;  // opt.yaml and hyp.yaml as saved into checkpoints
  RunPaths paths;
  DatasetConfig data;
  std::vector<std::string> names;
  int nc = 0, imgsz = 0, stride = 32;
  // --weights as resolve read it (dropped once loaded); its model YAML text when the
  // architecture comes from a YOLOv5 checkpoint (no --cfg).
  std::shared_ptr<const WeightsFile> weights;
  std::string model_yaml;
  // The text the model was built from (model_yaml, a resumed checkpoint's, or --cfg's file as
  // read at the start), saved into every checkpoint with nc and names.
  std::string model_yaml_text;
  DetectionModel model{nullptr};
  DetectionModel ema_model{nullptr};  // the EMA on rank 0; a copy for validation on the others
  std::unique_ptr<ModelEMA> ema;      // rank 0 only
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  Schedule schedule;
  std::shared_ptr<YoloDataset> train_set;
  std::unique_ptr<DataLoader> train_loader;
  std::unique_ptr<DataLoader> val_loader;  // this rank's share of the val batches
  // Benchmarks: the training batches come from here instead of train_loader when set.
  std::function<std::optional<Batch>()> batch_source;
  std::unique_ptr<GradSync> grad_sync;  // DDP
  std::vector<at::Tensor> ddp_buffers;  // broadcast before each forward without SyncBN
  std::unique_ptr<DataParallel> dp;     // several GPUs in one process
  bool amp = false;
  bool channels_last = false;      // model weights (so activations) in NHWC memory
  bool augment_on_device = false;  // --augment-device cuda on a CUDA device
  ThreadPlan threads;              // intra-op threads and loader workers
  std::unique_ptr<DetectionLoss> loss;
  ResumePoint resume;
  bool already_finished = false;      // --resume of a run that trained all its epochs
  std::shared_ptr<RunLock> run_lock;  // rank 0: held while this process trains in the folder
};

// Builds the run from its resolved configuration: device and process group, run dir (opt.yaml,
// hyp.yaml), data, model, optimizer, loaders, AutoAnchor, EMA, resume state, DDP and AMP. Throws
// UsageError for bad values, std::runtime_error for bad files.
TrainSetup set_up_training(TrainConfig cfg);

}  // namespace yolo

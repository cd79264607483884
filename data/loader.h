#pragma once
// Batches from a YoloDataset on worker threads, in a fixed order: the same seed gives the same
// batches however the threads are scheduled, because each sample's randomness is seeded from
// (seed, epoch, position, index) and batches are delivered in sampler order.
//
// The workers live as long as the loader (as YOLOv5's InfiniteDataLoader): they take one sample
// at a time, so a batch's samples load on every worker at once and its first batch arrives after
// one batch's work spread over all of them. The last worker to finish a batch's sample collates
// it. When an epoch's samples are all taken, the workers go on with the next epoch's (unless
// prefetch_next_epoch is off), so batches are ready when validation, checkpointing and the epoch
// boundary are over. At most `prefetch` batches (plus those in work) wait for the consumer.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/device_augment.h"
#include "data/sampler.h"

namespace yolo {

struct Batch {
  at::Tensor images;   // (bs, 3, h, w) RGB, float32 in 0..1 (or uint8, see float_images)
  at::Tensor targets;  // (n, 6): image index in batch, class, cx, cy, w, h (normalised)
  std::vector<std::string> paths;
  std::vector<ShapeInfo> shapes;  // to map boxes back to the originals (invalid for mosaics)
  // With LoaderOptions::recipes: the decoded sources and transforms, rendered on the device by
  // batch_images_to_device (`images` is then undefined).
  std::shared_ptr<RecipeBatch> recipes;
};

struct LoaderOptions {
  int batch_size = 16;  // per rank
  int workers = 8;      // upper bound; see loader_worker_count
  int world_size = 1;
  int rank = 0;
  // Evaluation across ranks: this rank's contiguous share of one process's batches (see
  // DistributedSampler::contiguous_batches); shuffle is then off.
  bool contiguous_batches = false;
  bool shuffle = true;
  uint64_t seed = 0;
  int prefetch = 4;  // finished batches buffered ahead of the consumer (besides those in work)
  // Go on with the next epoch's batches when this one's are all taken. Off when the dataset's
  // sample indices change between epochs (image weights), which must happen while no worker runs.
  bool prefetch_next_epoch = true;
  // true: images are float32 in 0..1. false: uint8 0..255 (4x smaller; divide on the device).
  bool float_images = true;
  bool pin_memory = false;  // page-locked batches for asynchronous copies to a GPU (CUDA only)
  // The GPU the batches are for: the workers make it their current device, so that their pinned
  // allocations open no CUDA context on another GPU (as PyTorch's pin-memory thread does).
  c10::Device device = c10::kCPU;
  // Batches as recipes (YoloDataset::get_recipe): workers decode and draw the transforms, the
  // pixels are made on the device (data/device_augment).
  bool recipes = false;
  // YOLOv5's quad collate (train --quad): each 4 samples become one image of twice the size, see
  // quad_batch. Not with recipes.
  bool quad = false;
};

// YOLOv5's worker count: min(hardware threads / world, batch_size (0 when batch is 1), workers).
int loader_worker_count(int workers, int batch_size, int world_size);

// Stacks samples into a Batch. Samples of different sizes are padded bottom/right with grey to
// the largest (their labels re-normalised), so rect batches split across ranks still stack.
// `pin_memory`: page-locked tensors, which a CUDA copy with non_blocking=true reads without
// making the host wait (needs a CUDA device).
Batch collate(std::vector<Sample>& samples, bool float_images = true, bool pin_memory = false);

// YOLOv5's collate_fn4: samples 4i..4i+3 become image i of twice their height and width, either
// sample 4i upsampled 2x (bilinear, probability 0.5, drawn from `seed`) with its labels, or the
// four as a 2x2 mosaic (4i top left, 4i+1 below it, 4i+2 top right, 4i+3 below that) with their
// labels moved and halved. Samples beyond a multiple of 4 are dropped; a batch of fewer than 4
// is returned as it is.
Batch quad_batch(Batch batch, uint64_t seed);

// A batch's images on `device` as float32 in 0..1, what the model takes. uint8 batches travel as
// bytes (asynchronously from pinned memory) and are converted there, as x * (1/255) in float:
// bit for bit what collate's float_images conversion gives. float32 batches are only moved.
at::Tensor images_to_device(const at::Tensor& images, const c10::Device& device);

// The batch's images on `device` as float32 in 0..1: rendered there from its recipes, or
// images_to_device of its images.
at::Tensor batch_images_to_device(const Batch& batch, const c10::Device& device);

class DataLoader {
 public:
  // A rect dataset forces shuffle off (with a warning), as YOLOv5. With no workers, next() loads
  // the batch's samples in parallel on LibTorch's intra-op threads. Sets cv::setNumThreads(0)
  // (process-wide) when an epoch starts.
  DataLoader(std::shared_ptr<const YoloDataset> dataset, LoaderOptions opt);
  ~DataLoader();  // stops and joins the workers; never blocks on a full queue
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts delivering the batches of `epoch`: those already prefetched for it are kept; any other
  // work is abandoned. Starts the workers on first use.
  void start_epoch(int64_t epoch);
  // start_epoch(one past the last epoch started, or 0): for loaders whose epochs are all alike
  // (validation), so that what was prefetched is used.
  void start_next_epoch();
  // The next batch of the current epoch, or nullopt at its end. A worker's exception (message
  // naming the image) is rethrown here and ends the epoch.
  std::optional<Batch> next();
  // Abandons all queued work and waits for the samples in work, so that nothing reads the
  // dataset until the next start_epoch (required before YoloDataset::set_indices). The workers
  // stay.
  void stop();

  size_t num_batches() const;  // per epoch, this rank
  // With contiguous_batches: the index, among one process's batches, of this rank's first.
  int64_t first_batch() const { return sampler_.first_index() / opt_.batch_size; }
  const YoloDataset& dataset() const { return *dataset_; }
  int workers() const { return workers_; }
  const DistributedSampler& sampler() const { return sampler_; }

 private:
  struct Job;
  struct Pool;
  struct Item;
  Batch make_batch(const std::vector<int64_t>& order, int64_t epoch, size_t b) const;
  Item load_item(const std::vector<int64_t>& order, int64_t epoch, size_t pos) const;
  Batch collate_items(std::vector<Item>& items, int64_t epoch, size_t b) const;
  std::shared_ptr<Job> make_job(int64_t epoch) const;
  void work();
  void cancel_jobs();
  size_t capacity() const;

  std::shared_ptr<const YoloDataset> dataset_;
  LoaderOptions opt_;
  DistributedSampler sampler_;
  int workers_;
  int64_t last_epoch_ = -1;
  std::shared_ptr<Job> current_;  // the epoch next() reads (no workers: also its batch counter)
  std::unique_ptr<Pool> pool_;    // null without workers or before the first epoch
};

}  // namespace yolo

#include "data/loader.h"

#include <torch/torch.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "utils/core/log.h"
#include "utils/core/runtime/cuda_env.h"

namespace yolo {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t sample_seed(uint64_t seed, int64_t epoch, size_t position, int64_t index) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<uint64_t>(epoch));
  h = splitmix64(h ^ static_cast<uint64_t>(position));
  return splitmix64(h ^ static_cast<uint64_t>(index));
}

}  // namespace

int loader_worker_count(int workers, int batch_size, int world_size) {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(
      0, std::min({cpus / std::max(world_size, 1), batch_size > 1 ? batch_size : 0, workers}));
}

Batch collate(std::vector<Sample>& samples, bool float_images, bool pin_memory) {
  Batch out;
  const int bs = static_cast<int>(samples.size());
  if (bs == 0) return out;
  int h = 0, w = 0;
  for (const auto& s : samples) h = std::max(h, s.image.rows), w = std::max(w, s.image.cols);
  // Mixed sizes (rect shapes split across ranks): pad bottom/right with grey, which keeps the
  // pixel boxes and the top/left pads; only the label normalisation changes.
  for (auto& s : samples) {
    if (s.image.rows == h && s.image.cols == w) continue;
    const float sx = float(s.image.cols) / w, sy = float(s.image.rows) / h;
    cv::Mat padded;
    cv::copyMakeBorder(s.image, padded, 0, h - s.image.rows, 0, w - s.image.cols,
                       cv::BORDER_CONSTANT, cv::Scalar(114, 114, 114));
    s.image = padded;
    for (auto& l : s.labels) l.cx *= sx, l.w *= sx, l.cy *= sy, l.h *= sy;
  }
  const auto pinned = torch::TensorOptions().pinned_memory(pin_memory);
  out.images =
      torch::empty({bs, 3, h, w}, pinned.dtype(float_images ? torch::kFloat32 : torch::kUInt8));
  size_t n_targets = 0;
  for (const auto& s : samples) n_targets += s.labels.size();
  out.targets = torch::empty({static_cast<int64_t>(n_targets), 6}, pinned.dtype(torch::kFloat32));
  float* t = out.targets.data_ptr<float>();
  const size_t plane = static_cast<size_t>(h) * w;
  const int depth = float_images ? CV_32F : CV_8U;
  auto* base = static_cast<unsigned char*>(out.images.data_ptr());
  for (int i = 0; i < bs; ++i) {
    const cv::Mat& im = samples[i].image;
    if (im.type() != CV_8UC3) {
      throw std::runtime_error(samples[i].path + ": sample is not an 8-bit BGR image");
    }
    // BGR HWC -> RGB CHW: split straight into the tensor's planes (B is plane 2, R plane 0).
    unsigned char* img = base + static_cast<size_t>(i) * 3 * plane * out.images.element_size();
    const size_t plane_bytes = plane * out.images.element_size();
    std::vector<cv::Mat> planes = {cv::Mat(h, w, depth, img + 2 * plane_bytes),
                                   cv::Mat(h, w, depth, img + plane_bytes),
                                   cv::Mat(h, w, depth, img)};
    if (float_images) {
      cv::Mat bgr[3];
      cv::split(im, bgr);
      for (int c = 0; c < 3; ++c) bgr[c].convertTo(planes[c], CV_32F, 1.0 / 255);
    } else {
      cv::split(im, planes);
    }
    for (const auto& l : samples[i].labels) {
      *t++ = static_cast<float>(i);
      *t++ = l.cls, *t++ = l.cx, *t++ = l.cy, *t++ = l.w, *t++ = l.h;
    }
    out.paths.push_back(std::move(samples[i].path));
    out.shapes.push_back(samples[i].shape);
  }
  return out;
}

Batch quad_batch(Batch in, uint64_t seed) {
  const int64_t n = in.images.size(0) / 4;
  if (n == 0) return in;
  Rng rng(seed);
  const at::Tensor& t = in.targets;
  const auto labels_of = [&](int64_t j) { return t.index({t.select(1, 0) == j}); };
  const at::Tensor ho = torch::tensor({0.f, 0.f, 0.f, 1.f, 0.f, 0.f});  // one image down
  const at::Tensor wo = torch::tensor({0.f, 0.f, 1.f, 0.f, 0.f, 0.f});  // one image right
  const at::Tensor half = torch::tensor({1.f, 1.f, .5f, .5f, .5f, .5f});
  std::vector<at::Tensor> images, targets;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = 4 * i;
    const at::Tensor im = in.images;
    at::Tensor lb;
    if (uniform(rng, 0, 1) < 0.5) {
      namespace F = torch::nn::functional;
      images.push_back(F::interpolate(im[k].unsqueeze(0).to(torch::kFloat),
                                      F::InterpolateFuncOptions()
                                          .scale_factor(std::vector<double>{2.0, 2.0})
                                          .mode(torch::kBilinear)
                                          .align_corners(false))[0]
                           .to(im.scalar_type()));
      lb = labels_of(k).clone();
    } else {
      images.push_back(torch::cat(
          {torch::cat({im[k], im[k + 1]}, 1), torch::cat({im[k + 2], im[k + 3]}, 1)}, 2));
      lb = torch::cat({labels_of(k), labels_of(k + 1) + ho, labels_of(k + 2) + wo,
                       labels_of(k + 3) + ho + wo}) *
           half;
    }
    lb.select(1, 0).fill_(static_cast<float>(i));
    targets.push_back(lb);
  }
  Batch out;
  out.images = torch::stack(images);
  out.targets = torch::cat(targets);
  out.paths.assign(in.paths.begin(), in.paths.begin() + n);
  out.shapes.assign(in.shapes.begin(), in.shapes.begin() + n);
  return out;
}

at::Tensor images_to_device(const at::Tensor& images, const c10::Device& device) {
  at::Tensor x = images.to(device, /*non_blocking=*/true);
  if (x.scalar_type() == torch::kUInt8) x = x.to(torch::kFloat32).mul_(1.0 / 255);
  return x;
}

at::Tensor batch_images_to_device(const Batch& batch, const c10::Device& device) {
  return batch.recipes ? render_batch(*batch.recipes, device)
                       : images_to_device(batch.images, device);
}

// One loaded sample: its pixels, or with LoaderOptions::recipes what makes them.
struct DataLoader::Item {
  Sample sample;
  SampleRecipe recipe;
};

// One epoch of this rank: its sample order and the batches in work or ready.
struct DataLoader::Job {
  struct Slot {
    std::vector<Item> samples;
    size_t remaining = 0;  // samples not yet loaded
    std::exception_ptr error;
    std::optional<Batch> batch;
    bool done = false;
  };
  int64_t epoch = 0;
  std::vector<int64_t> order;  // this rank's sample indices
  size_t batches = 0;
  size_t next_claim = 0;  // next sample position a worker takes
  size_t delivered = 0;   // batches returned by next()
  bool cancelled = false;
  std::map<size_t, Slot> slots;  // batches claimed and not yet delivered
};

struct DataLoader::Pool {
  std::mutex m;
  std::condition_variable cv;             // claimable work, a finished batch, stop
  std::deque<std::shared_ptr<Job>> jobs;  // epochs in order: current (or next), then prefetched
  size_t outstanding = 0;                 // batches claimed and not delivered, over all jobs
  size_t in_flight = 0;                   // samples being loaded or collated
  bool shutdown = false;
  std::vector<std::thread> threads;
};

DataLoader::DataLoader(std::shared_ptr<const YoloDataset> dataset, LoaderOptions opt)
    : dataset_(std::move(dataset)),
      opt_(opt),
      sampler_(static_cast<int64_t>(dataset_->size()), opt.world_size, opt.rank, opt.shuffle,
               opt.seed),
      workers_(loader_worker_count(opt.workers, opt.batch_size, opt.world_size)) {
  if (opt_.batch_size < 1) throw std::invalid_argument("DataLoader: batch_size must be >= 1");
  if (opt_.contiguous_batches) {
    opt_.shuffle = false;
    sampler_ = DistributedSampler::contiguous_batches(static_cast<int64_t>(dataset_->size()),
                                                      opt_.world_size, opt_.rank, opt_.batch_size);
  } else if (dataset_->options().rect && opt_.shuffle) {
    log_warn("--rect is incompatible with DataLoader shuffle, setting shuffle=False");
    opt_.shuffle = false;
    sampler_ = DistributedSampler(static_cast<int64_t>(dataset_->size()), opt_.world_size,
                                  opt_.rank, false, opt_.seed);
  }
}

DataLoader::~DataLoader() {
  if (!pool_) return;
  {
    std::lock_guard<std::mutex> lock(pool_->m);
    pool_->shutdown = true;  // workers finish the sample in hand and leave
  }
  pool_->cv.notify_all();
  for (auto& t : pool_->threads) t.join();
}

size_t DataLoader::num_batches() const {
  const auto n = static_cast<size_t>(sampler_.num_samples());
  return (n + opt_.batch_size - 1) / opt_.batch_size;
}

// Batches in work or waiting: enough for every worker to hold a sample, plus `prefetch` ready.
size_t DataLoader::capacity() const {
  const auto bs = static_cast<size_t>(opt_.batch_size);
  return static_cast<size_t>(std::max(1, opt_.prefetch)) + (workers_ + bs - 1) / bs;
}

std::shared_ptr<DataLoader::Job> DataLoader::make_job(int64_t epoch) const {
  auto job = std::make_shared<Job>();
  DistributedSampler sampler = sampler_;
  sampler.set_epoch(epoch);
  job->epoch = epoch;
  job->order = sampler.indices();
  job->batches = num_batches();
  return job;
}

DataLoader::Item DataLoader::load_item(const std::vector<int64_t>& order, int64_t epoch,
                                       size_t pos) const {
  const int64_t idx = order[pos];
  // Global position (pos * world + rank) so ranks never share a random stream.
  const size_t global_pos = pos * static_cast<size_t>(opt_.world_size) + opt_.rank;
  Rng rng(sample_seed(opt_.seed, epoch, global_pos, idx));
  Item item;
  if (opt_.recipes) {
    item.recipe = dataset_->get_recipe(static_cast<size_t>(idx), rng, epoch);
  } else {
    item.sample = dataset_->get(static_cast<size_t>(idx), rng, epoch);
  }
  return item;
}

Batch DataLoader::collate_items(std::vector<Item>& items, int64_t epoch, size_t b) const {
  if (!opt_.recipes) {
    std::vector<Sample> samples;
    samples.reserve(items.size());
    for (auto& it : items) samples.push_back(std::move(it.sample));
    if (!opt_.quad) return collate(samples, opt_.float_images, opt_.pin_memory);
    // The quad's draw has its own stream per (epoch, batch, rank), as each sample's does.
    const size_t global_b = b * static_cast<size_t>(opt_.world_size) + opt_.rank;
    Batch out = quad_batch(collate(samples, opt_.float_images, false),
                           sample_seed(opt_.seed ^ 0x71756164ull, epoch, global_b, -1));
    if (opt_.pin_memory) {
      out.images = out.images.pin_memory();
      out.targets = out.targets.pin_memory();
    }
    return out;
  }
  std::vector<SampleRecipe> recipes;
  recipes.reserve(items.size());
  for (auto& it : items) recipes.push_back(std::move(it.recipe));
  Batch out;
  out.recipes = std::make_shared<RecipeBatch>(collate_recipes(recipes, opt_.pin_memory));
  out.targets = out.recipes->targets;
  out.paths = std::move(out.recipes->paths);  // rendering needs neither
  out.shapes = std::move(out.recipes->shapes);
  return out;
}

// Without workers: the batch's samples load in the consumer's step.
Batch DataLoader::make_batch(const std::vector<int64_t>& order, int64_t epoch, size_t b) const {
  const size_t bs = static_cast<size_t>(opt_.batch_size);
  const size_t begin = b * bs, end = std::min(order.size(), begin + bs);
  std::vector<Item> samples(end - begin);
  auto load = [&](int64_t from, int64_t to) {
    for (int64_t k = from; k < to; ++k) samples[k] = load_item(order, epoch, begin + k);
  };
  const auto n = static_cast<int64_t>(samples.size());
  const int64_t helpers = std::min<int64_t>(n, at::get_num_threads()) - 1;
  if (helpers > 0) {
    // Split over as many threads as the kernels use, which are idle while it loads. Plain
    // threads, not at::parallel_for: OpenCV run on LibTorch's OpenMP threads made the kernels
    // after it three times slower (bench_train). Each sample has its own seed, so the batch is
    // the same on any thread count.
    std::vector<std::exception_ptr> errors(static_cast<size_t>(helpers) + 1);
    auto slice = [&](int64_t t) {
      try {
        load(n * t / (helpers + 1), n * (t + 1) / (helpers + 1));
      } catch (...) {
        errors[static_cast<size_t>(t)] = std::current_exception();
      }
    };
    std::vector<std::thread> threads;
    for (int64_t t = 1; t <= helpers; ++t) threads.emplace_back(slice, t);
    slice(0);
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  } else {
    load(0, n);
  }
  return collate_items(samples, epoch, b);
}

// Marks every queued job abandoned (workers drop what they finish for it) and forgets them.
// Called with the pool's lock held.
void DataLoader::cancel_jobs() {
  for (auto& job : pool_->jobs) {
    job->cancelled = true;
    pool_->outstanding -= job->slots.size();
  }
  pool_->jobs.clear();
}

// A worker: claims the first unclaimed sample (current epoch first, then the prefetched one),
// loads it outside the lock, and collates the batch when it finishes its last sample.
void DataLoader::work() {
  set_current_cuda_device(opt_.device);  // no-op for the CPU
  Pool& p = *pool_;
  const size_t bs = static_cast<size_t>(opt_.batch_size);
  auto claim = [&](std::shared_ptr<Job>& job, size_t& pos) {
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& j : p.jobs) {
        if (j->next_claim >= j->order.size()) continue;
        const size_t b = j->next_claim / bs;
        if (!j->slots.count(b)) {
          if (p.outstanding >= capacity()) return false;
          Job::Slot& slot = j->slots[b];
          slot.remaining = std::min(j->order.size(), (b + 1) * bs) - b * bs;
          slot.samples.resize(slot.remaining);
          ++p.outstanding;
        }
        job = j;
        pos = j->next_claim++;
        return true;
      }
      // Every sample queued is taken: go on with the next epoch (one epoch ahead at most).
      if (!opt_.prefetch_next_epoch || p.jobs.empty() || p.jobs.size() >= 2) return false;
      p.jobs.push_back(make_job(p.jobs.back()->epoch + 1));
    }
    return false;
  };
  std::unique_lock<std::mutex> lock(p.m);
  for (;;) {
    std::shared_ptr<Job> job;
    size_t pos = 0;
    p.cv.wait(lock, [&] { return p.shutdown || claim(job, pos); });
    if (p.shutdown) return;
    ++p.in_flight;
    lock.unlock();
    Item sample;
    std::exception_ptr error;
    try {
      sample = load_item(job->order, job->epoch, pos);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    // Slots are only erased when delivered (after done) and map nodes never move, so the slot
    // stays valid while this worker collates it unlocked.
    Job::Slot& slot = job->slots[pos / bs];
    if (!job->cancelled) {
      slot.samples[pos % bs] = std::move(sample);
      if (error && !slot.error) slot.error = error;
      if (--slot.remaining == 0) {
        if (!slot.error) {
          std::vector<Item> samples = std::move(slot.samples);
          lock.unlock();
          std::optional<Batch> batch;
          try {
            batch = collate_items(samples, job->epoch, pos / bs);
          } catch (...) {
            error = std::current_exception();
          }
          lock.lock();
          slot.batch = std::move(batch);
          if (error) slot.error = error;
        }
        slot.done = true;
      }
    }
    --p.in_flight;
    lock.unlock();
    p.cv.notify_all();
    lock.lock();
  }
}

void DataLoader::stop() {
  current_.reset();
  if (!pool_) return;
  std::unique_lock<std::mutex> lock(pool_->m);
  cancel_jobs();
  pool_->cv.wait(lock, [&] { return pool_->in_flight == 0; });
}

void DataLoader::start_epoch(int64_t epoch) {
  last_epoch_ = epoch;
  // Workers or the intra-op threads are the parallelism; OpenCV's own pool would oversubscribe
  // the cores (as YOLOv5).
  cv::setNumThreads(0);
  if (workers_ == 0) {
    sampler_.set_epoch(epoch);
    current_ = make_job(epoch);
    return;
  }
  if (!pool_) {
    pool_ = std::make_unique<Pool>();
    for (int w = 0; w < workers_; ++w) pool_->threads.emplace_back([this] { work(); });
  }
  {
    std::lock_guard<std::mutex> lock(pool_->m);
    sampler_.set_epoch(epoch);  // under the lock: workers copy the sampler for the next epoch
    auto& jobs = pool_->jobs;
    const bool prefetched = !jobs.empty() && jobs.front() != current_ &&
                            jobs.front()->epoch == epoch && jobs.front()->delivered == 0;
    if (!prefetched) {
      cancel_jobs();
      jobs.push_back(make_job(epoch));
    }
    current_ = jobs.front();
  }
  pool_->cv.notify_all();
}

void DataLoader::start_next_epoch() { start_epoch(last_epoch_ + 1); }

std::optional<Batch> DataLoader::next() {
  if (!current_) return std::nullopt;
  Job& j = *current_;
  if (j.delivered >= j.batches) return std::nullopt;
  if (workers_ == 0) {
    try {
      return make_batch(j.order, j.epoch, j.delivered++);
    } catch (...) {
      stop();  // as with workers: an error ends the epoch
      throw;
    }
  }
  Pool& p = *pool_;
  std::unique_lock<std::mutex> lock(p.m);
  const size_t b = j.delivered;
  p.cv.wait(lock, [&] {
    auto it = j.slots.find(b);
    return it != j.slots.end() && it->second.done;
  });
  Job::Slot slot = std::move(j.slots.extract(b).mapped());
  --p.outstanding;
  if (++j.delivered == j.batches && !p.jobs.empty() && p.jobs.front() == current_) {
    p.jobs.pop_front();  // the prefetched epoch, if any, is now first
  }
  lock.unlock();
  p.cv.notify_all();
  if (slot.error) {
    stop();
    std::rethrow_exception(slot.error);
  }
  return std::move(slot.batch);
}

}  // namespace yolo

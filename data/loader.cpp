#include "data/loader.h"

#include <torch/torch.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "utils/core/log.h"

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

at::Tensor images_to_device(const at::Tensor& images, const c10::Device& device) {
  at::Tensor x = images.to(device, /*non_blocking=*/true);
  if (x.scalar_type() == torch::kUInt8) x = x.to(torch::kFloat32).mul_(1.0 / 255);
  return x;
}

struct DataLoader::Epoch {
  int64_t epoch = 0;
  std::vector<int64_t> order;  // this rank's sample indices
  size_t batches = 0;
  size_t capacity = 1;  // batches produced ahead of the consumer

  std::mutex m;
  std::condition_variable cv;
  size_t next_claim = 0;    // next batch a worker takes
  size_t next_deliver = 0;  // next batch the consumer returns
  bool stopping = false;
  std::map<size_t, std::pair<std::optional<Batch>, std::exception_ptr>> ready;
  std::vector<std::thread> threads;
};

DataLoader::DataLoader(std::shared_ptr<const YoloDataset> dataset, LoaderOptions opt)
    : dataset_(std::move(dataset)),
      opt_(opt),
      sampler_(static_cast<int64_t>(dataset_->size()), opt.world_size, opt.rank, opt.shuffle,
               opt.seed),
      workers_(loader_worker_count(opt.workers, opt.batch_size, opt.world_size)) {
  if (opt_.batch_size < 1) throw std::invalid_argument("DataLoader: batch_size must be >= 1");
  if (dataset_->options().rect && opt_.shuffle) {
    log_warn("--rect is incompatible with DataLoader shuffle, setting shuffle=False");
    opt_.shuffle = false;
    sampler_ = DistributedSampler(static_cast<int64_t>(dataset_->size()), opt_.world_size,
                                  opt_.rank, false, opt_.seed);
  }
}

DataLoader::~DataLoader() { stop(); }

size_t DataLoader::num_batches() const {
  const auto n = static_cast<size_t>(sampler_.num_samples());
  return (n + opt_.batch_size - 1) / opt_.batch_size;
}

Batch DataLoader::make_batch(const Epoch& e, size_t b) const {
  const size_t bs = static_cast<size_t>(opt_.batch_size);
  const size_t begin = b * bs, end = std::min(e.order.size(), begin + bs);
  std::vector<Sample> samples(end - begin);
  auto load = [&](int64_t from, int64_t to) {
    for (int64_t k = from; k < to; ++k) {
      const size_t pos = begin + static_cast<size_t>(k);
      const int64_t idx = e.order[pos];
      // Global position (pos * world + rank) so ranks never share a random stream.
      const size_t global_pos = pos * static_cast<size_t>(opt_.world_size) + opt_.rank;
      Rng rng(sample_seed(opt_.seed, e.epoch, global_pos, idx));
      samples[k] = dataset_->get(static_cast<size_t>(idx), rng);
    }
  };
  const auto n = static_cast<int64_t>(samples.size());
  const int64_t helpers = workers_ == 0 ? std::min<int64_t>(n, at::get_num_threads()) - 1 : 0;
  if (helpers > 0) {
    // In the consumer's step, split over as many threads as the kernels use, which are idle
    // while it loads. Plain threads, not at::parallel_for: OpenCV run on LibTorch's OpenMP
    // threads made the kernels after it three times slower (bench_train). Each sample has its
    // own seed, so the batch is the same on any thread count.
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
  return collate(samples, opt_.float_images, opt_.pin_memory);
}

void DataLoader::stop() {
  if (!epoch_) return;
  {
    std::lock_guard<std::mutex> lock(epoch_->m);
    epoch_->stopping = true;
  }
  epoch_->cv.notify_all();
  for (auto& t : epoch_->threads) t.join();
  epoch_.reset();
}

void DataLoader::start_epoch(int64_t epoch) {
  stop();
  sampler_.set_epoch(epoch);
  epoch_ = std::make_unique<Epoch>();
  Epoch& e = *epoch_;
  e.epoch = epoch;
  e.order = sampler_.indices();
  e.batches = num_batches();
  // Enough claims to keep every worker busy plus `prefetch` finished batches waiting.
  e.capacity = static_cast<size_t>(workers_ + std::max(1, opt_.prefetch));
  // Workers or the intra-op threads are the parallelism; OpenCV's own pool would oversubscribe
  // the cores (as YOLOv5).
  cv::setNumThreads(0);
  if (workers_ == 0) return;
  for (int w = 0; w < workers_; ++w) {
    e.threads.emplace_back([this, &e] {
      for (;;) {
        size_t b;
        {
          std::unique_lock<std::mutex> lock(e.m);
          e.cv.wait(lock, [&] {
            return e.stopping || e.next_claim >= e.batches ||
                   e.next_claim < e.next_deliver + e.capacity;
          });
          if (e.stopping || e.next_claim >= e.batches) return;
          b = e.next_claim++;
        }
        std::optional<Batch> batch;
        std::exception_ptr error;
        try {
          batch = make_batch(e, b);
        } catch (...) {
          error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(e.m);
          e.ready[b] = {std::move(batch), error};
        }
        e.cv.notify_all();
      }
    });
  }
}

std::optional<Batch> DataLoader::next() {
  if (!epoch_) return std::nullopt;
  Epoch& e = *epoch_;
  if (workers_ == 0) {
    if (e.next_deliver >= e.batches) return std::nullopt;
    try {
      return make_batch(e, e.next_deliver++);
    } catch (...) {
      stop();  // as with workers: an error ends the epoch
      throw;
    }
  }
  if (e.next_deliver >= e.batches) {  // only this thread advances next_deliver
    stop();  // join the finished workers, so the dataset may be changed (set_indices)
    return std::nullopt;
  }
  std::pair<std::optional<Batch>, std::exception_ptr> item;
  {
    std::unique_lock<std::mutex> lock(e.m);
    e.cv.wait(lock, [&] { return e.ready.count(e.next_deliver) > 0; });
    auto it = e.ready.find(e.next_deliver);
    item = std::move(it->second);
    e.ready.erase(it);
    ++e.next_deliver;
  }
  e.cv.notify_all();
  if (item.second) {
    stop();
    std::rethrow_exception(item.second);
  }
  return std::move(item.first);
}

DataPipeline create_dataloader(const std::vector<std::string>& sources, const PipelineConfig& c) {
  DatasetOptions d;
  d.imgsz = c.imgsz;
  d.batch_size = c.batch_size;
  d.augment = c.augment;
  d.rect = c.rect;
  d.single_cls = c.single_cls;
  d.stride = c.stride;
  d.pad = c.pad;
  d.cache = c.cache;
  d.hyp = c.hyp;
  d.nc = c.nc;
  d.barrier = c.barrier;
  d.is_rank0 = c.rank <= 0;
  DataPipeline p;
  p.dataset = std::make_shared<YoloDataset>(sources, d);
  LoaderOptions lo;
  lo.batch_size = std::max(1, std::min(c.batch_size, static_cast<int>(p.dataset->size())));
  lo.workers = c.workers;
  lo.world_size = std::max(1, c.world_size);
  lo.rank = std::max(0, c.rank);
  lo.shuffle = c.shuffle && !c.rect;
  lo.seed = c.seed;
  p.loader = std::make_unique<DataLoader>(p.dataset, lo);
  return p;
}

}  // namespace yolo

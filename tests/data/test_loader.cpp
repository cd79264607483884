// YoloDataset samples (train and val paths, rect shapes, caches, image weights) and the
// threaded DataLoader (determinism, shapes, shutdown, error propagation).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "data/image_io.h"
#include "data/loader.h"
#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace yolo;
using yolo::test::colour_bbox;
using yolo::test::make_split;
using yolo::test::TempDir;
using yolo::test::write_image;
using yolo::test::write_text;

namespace {

DatasetOptions val_options(int imgsz = 64) {
  DatasetOptions o;
  o.imgsz = imgsz;
  o.batch_size = 4;
  o.nc = 2;
  o.hyp = AugmentHyp::none();
  o.threads = 2;
  return o;
}

DatasetOptions train_options(int imgsz = 64) {
  DatasetOptions o = val_options(imgsz);
  o.augment = true;
  o.hyp = AugmentHyp();
  o.hyp.hsv_h = o.hyp.hsv_s = o.hyp.hsv_v = 0;  // keep the box colour for pixel checks
  o.hyp.flipud = 0.5;
  o.hyp.mixup = 0.0;
  o.hyp.degrees = 10;
  return o;
}

const cv::Scalar kRed(0, 0, 255);

}  // namespace

TEST(Dataset, ValSampleMapsBackToOriginal) {
  TempDir d;
  make_split(d.path(), "val", 3, 96, 64);
  YoloDataset ds({d / "images/val"}, val_options(64));
  ASSERT_EQ(ds.size(), 3u);
  Rng rng(0);
  const Sample s = ds.get(1, rng);
  EXPECT_EQ(s.image.size(), cv::Size(64, 64));
  ASSERT_TRUE(s.shape.valid);
  EXPECT_EQ(s.shape.h0, 64);
  EXPECT_EQ(s.shape.w0, 96);
  ASSERT_EQ(s.labels.size(), 1u);
  const Label& l = s.labels[0];
  const cv::Rect px = colour_bbox(s.image, kRed);
  EXPECT_NEAR((l.cx - l.w / 2) * 64, px.x, 1.0);
  EXPECT_NEAR((l.cy + l.h / 2) * 64, px.y + px.height, 1.0);
  // Back to original pixels: (x - pad) / ratio.
  const Label& orig = ds.labels()[1][0];
  const float x1 = ((l.cx - l.w / 2) * 64 - s.shape.pad_w) / s.shape.ratio_w;
  const float y1 = ((l.cy - l.h / 2) * 64 - s.shape.pad_h) / s.shape.ratio_h;
  EXPECT_NEAR(x1, (orig.cx - orig.w / 2) * 96, 0.01);
  EXPECT_NEAR(y1, (orig.cy - orig.h / 2) * 64, 0.01);
}

TEST(Dataset, TrainSamplesKeepBoxesOnPixels) {
  TempDir d;
  make_split(d.path(), "train", 6, 80, 64);
  auto opt = train_options(64);
  YoloDataset ds({d / "images/train"}, opt);
  int mosaics = 0, checked = 0;
  for (size_t i = 0; i < 24; ++i) {
    Rng rng(i);
    const Sample s = ds.get(i % ds.size(), rng);
    EXPECT_EQ(s.image.size(), cv::Size(64, 64));
    mosaics += !s.shape.valid;
    for (const auto& l : s.labels) {
      // Within the label box (grown 3 px), red pixels reach the box edges.
      const cv::Rect2f r((l.cx - l.w / 2) * 64, (l.cy - l.h / 2) * 64, l.w * 64, l.h * 64);
      const cv::Rect roi =
          cv::Rect(int(r.x) - 3, int(r.y) - 3, int(r.width) + 7, int(r.height) + 7) &
          cv::Rect(0, 0, 64, 64);
      cv::Rect px = colour_bbox(s.image(roi), kRed, 60);
      ASSERT_FALSE(px.empty());
      px.x += roi.x, px.y += roi.y;
      // Another box of the mosaic may touch the grown region, so only check containment/size.
      EXPECT_GE(px.x, r.x - 3);
      EXPECT_LE(px.x + px.width, r.x + r.width + 3);
      // Rotated corners blend with the background, so a few edge pixels fail the colour test.
      EXPECT_GE(px.width, r.width - 5);
      EXPECT_GE(px.height, r.height - 5);
      ++checked;
    }
  }
  EXPECT_EQ(mosaics, 24);  // mosaic probability 1
  EXPECT_GT(checked, 20);
}

TEST(Dataset, RectBatchShapes) {
  TempDir d;
  make_split(d.path(), "a", 3, 128, 64);  // wide
  make_split(d.path(), "b", 3, 64, 128);  // tall
  auto opt = val_options(128);
  opt.rect = true;
  opt.batch_size = 3;
  opt.pad = 0.5;
  YoloDataset ds({d / "images/a", d / "images/b"}, opt);
  ASSERT_EQ(ds.batch_shapes().size(), 2u);
  // Sorted by aspect ratio h/w: the wide images first.
  EXPECT_EQ(ds.image_sizes()[0], cv::Size(128, 64));
  EXPECT_EQ(ds.batch_shapes()[0], cv::Size(160, 96));  // ceil(128/32 + .5)*32, ceil(2+.5)*32
  EXPECT_EQ(ds.batch_shapes()[1], cv::Size(96, 160));
  Rng rng(0);
  EXPECT_EQ(ds.get(4, rng).image.size(), cv::Size(96, 160));
}

TEST(Dataset, CachesGiveTheSameSamples) {
  TempDir d;
  make_split(d.path(), "val", 3, 96, 72);
  auto opt = val_options(64);
  YoloDataset plain({d / "images/val"}, opt);
  opt.cache = "ram";
  YoloDataset ram({d / "images/val"}, opt);
  opt.cache = "disk";
  YoloDataset disk({d / "images/val"}, opt);
  EXPECT_TRUE(fs::exists(d / "images/val/im0.png.64-area.cache"));
  for (size_t i = 0; i < 3; ++i) {
    Rng r1(i), r2(i), r3(i);
    const cv::Mat a = plain.get(i, r1).image, b = ram.get(i, r2).image, c = disk.get(i, r3).image;
    EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0);
    EXPECT_EQ(cv::norm(a, c, cv::NORM_INF), 0);
  }
  opt.cache = "gpu";
  EXPECT_THROW(YoloDataset({d / "images/val"}, opt), std::exception);
}

TEST(Dataset, RamCacheIsNotModifiedByAugmentation) {
  TempDir d;
  make_split(d.path(), "train", 2, 64, 64);
  auto opt = train_options(64);
  opt.hyp.mosaic = 0;
  opt.hyp.hsv_v = 0.9;
  opt.hyp.fliplr = 1;
  opt.hyp.degrees = 0, opt.hyp.scale = 0, opt.hyp.translate = 0;
  for (const char* cache : {"ram", ""}) {  // "": the bounded cache of decoded images
    SCOPED_TRACE(cache);
    opt.cache = cache;
    YoloDataset ds({d / "images/train"}, opt);
    const cv::Mat before = ds.load_image(0).clone();
    for (int k = 0; k < 3; ++k) {
      Rng rng(k);
      ds.get(0, rng);
    }
    EXPECT_EQ(cv::norm(before, ds.load_image(0), cv::NORM_INF), 0);
  }
}

TEST(Dataset, BoundedCacheDecodesEachImageOnceWithinItsBudget) {
  TempDir d;
  make_split(d.path(), "train", 7, 64, 48);
  const std::vector<std::string> src = {d / "images/train"};
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);  // one loading thread, so no image is decoded twice at once
  auto epochs = [&](std::shared_ptr<YoloDataset> ds) {
    LoaderOptions o;
    o.batch_size = 3;
    o.workers = 0;
    DataLoader loader(ds, o);
    std::vector<Batch> out;
    for (int e = 0; e < 2; ++e) {
      loader.start_epoch(e);
      while (auto b = loader.next()) out.push_back(std::move(*b));
    }
    return out;
  };
  auto opt = train_options(64);
  auto cached = std::make_shared<YoloDataset>(src, opt);
  opt.image_cache_bytes = 0;
  auto uncached = std::make_shared<YoloDataset>(src, opt);
  const auto a = epochs(cached), b = epochs(uncached);
  at::set_num_threads(threads_before);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].images, b[i].images));
  const ImageCache::Stats st = cached->image_cache_stats();
  // Mosaics read each sample's own image and three others: 7 * 2 * 4 reads, 7 decodes.
  EXPECT_EQ(st.misses, 7u);
  EXPECT_EQ(st.hits, 7u * 2 * 4 - 7);
  EXPECT_EQ(st.images, 7u);
  EXPECT_EQ(st.bytes, 7 * 64 * 48 * 3);
  EXPECT_EQ(uncached->image_cache_stats().images, 0u);
  EXPECT_EQ(uncached->image_cache_stats().budget, 0);

  opt.image_cache_bytes = 2 * 64 * 48 * 3 + 5;  // room for two images
  YoloDataset small(src, opt);
  for (size_t i = 0; i < 7; ++i) small.load_image(i);
  EXPECT_EQ(small.image_cache_stats().images, 2u);
  EXPECT_LE(small.image_cache_stats().bytes, opt.image_cache_bytes);
  EXPECT_EQ(cv::norm(small.load_image(6), uncached->load_image(6), cv::NORM_INF), 0);
}

TEST(Dataset, RamCacheIsRefusedWhenTheImagesDoNotFitInMemory) {
  TempDir d;
  make_split(d.path(), "val", 3, 64, 48);
  auto opt = val_options(64);
  opt.imgsz = 1 << 20;  // 3 TB of resized images: more than any host has
  opt.cache = "ram";
  YoloDataset ds({d / "images/val"}, opt);
  EXPECT_EQ(ds.ram_cache_bytes(), 0);
  EXPECT_GT(ds.image_cache_stats().budget, 0);  // the bounded cache serves instead
  opt.imgsz = 64;
  YoloDataset fits({d / "images/val"}, opt);
  EXPECT_EQ(fits.ram_cache_bytes(), 3 * 64 * 48 * 3);
  EXPECT_EQ(fits.image_cache_stats().budget, 0);
}

TEST(Dataset, SingleClsAndImageWeights) {
  TempDir d;
  make_split(d.path(), "train", 4, 32, 32, 2);  // classes 0,1,0,1
  write_text(d / "labels/train/im2.txt", "1 0.5 0.5 0.2 0.2\n1 0.3 0.3 0.2 0.2\n");
  auto opt = val_options(32);
  YoloDataset ds({d / "images/train"}, opt);
  const auto cw = class_weights(ds.labels(), 2);
  // counts: class0 = 1, class1 = 4 -> weights 1, 0.25 normalised.
  EXPECT_NEAR(cw[0], 0.8, 1e-9);
  EXPECT_NEAR(cw[1], 0.2, 1e-9);
  const auto iw = image_weights(ds.labels(), 2, cw);
  EXPECT_NEAR(iw[0], 0.8, 1e-9);
  EXPECT_NEAR(iw[2], 0.4, 1e-9);
  Rng rng(1);
  const auto picks = weighted_indices({0, 1, 0, 3}, 4000, rng);
  size_t ones = 0, zeros = 0;
  for (auto p : picks) ones += p == 1, zeros += (p == 0 || p == 2);
  EXPECT_EQ(zeros, 0u);
  EXPECT_NEAR(ones / 4000.0, 0.25, 0.03);
  YoloDataset mapped({d / "images/train"}, opt);
  mapped.set_indices({3, 3, 3, 3});
  Rng r(0);
  EXPECT_EQ(mapped.get(0, r).path, mapped.image_files()[3]);
  EXPECT_THROW(mapped.set_indices({0}), std::invalid_argument);

  opt.single_cls = true;
  opt.nc = 1;  // as the trainer passes it; class 1 labels stay valid
  YoloDataset single({d / "images/train"}, opt);
  EXPECT_EQ(single.size(), 4u);
  for (const auto& ls : single.labels()) {
    for (const auto& l : ls) EXPECT_EQ(l.cls, 0);
  }
}

TEST(Loader, WorkerCount) {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(loader_worker_count(8, 1, 1), 0);
  EXPECT_EQ(loader_worker_count(0, 16, 1), 0);
  EXPECT_EQ(loader_worker_count(1, 16, 1), 1);
  EXPECT_EQ(loader_worker_count(64, 64, 1), cpus);
  EXPECT_EQ(loader_worker_count(64, 64, cpus * 2), 0);
}

TEST(Loader, BatchesAreDeterministicAcrossWorkerCounts) {
  TempDir d;
  make_split(d.path(), "train", 7, 64, 48);
  auto ds = std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/train"},
                                          train_options(64));
  const int threads_before = at::get_num_threads();
  auto run = [&](int workers, int threads = 1) {
    at::set_num_threads(threads);  // without workers, the batch loads on this many threads
    LoaderOptions o;
    o.batch_size = 3;
    o.workers = workers;
    o.seed = 11;
    DataLoader loader(ds, o);
    EXPECT_EQ(loader.num_batches(), 3u);
    loader.start_epoch(1);
    std::vector<Batch> out;
    while (auto b = loader.next()) out.push_back(std::move(*b));
    return out;
  };
  const auto a = run(0), b = run(2), c = run(2), two = run(0, 2), e = run(0, 3);
  at::set_num_threads(threads_before);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(a[0].images.sizes(), (std::vector<int64_t>{3, 3, 64, 64}));
  EXPECT_EQ(a[2].images.size(0), 1);  // 7 = 3 + 3 + 1
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].images, b[i].images));
    EXPECT_TRUE(torch::equal(a[i].targets, b[i].targets));
    EXPECT_TRUE(torch::equal(b[i].images, c[i].images));
    EXPECT_TRUE(torch::equal(a[i].images, two[i].images));
    EXPECT_TRUE(torch::equal(a[i].images, e[i].images));
    EXPECT_TRUE(torch::equal(a[i].targets, e[i].targets));
    EXPECT_EQ(a[i].paths, b[i].paths);
    EXPECT_EQ(a[i].paths, e[i].paths);
  }
  EXPECT_GE(a[0].images.min().item<float>(), 0.f);
  EXPECT_LE(a[0].images.max().item<float>(), 1.f);
  ASSERT_EQ(a[0].targets.dim(), 2);
  EXPECT_EQ(a[0].targets.size(1), 6);
  const auto img_idx = a[0].targets.select(1, 0);
  EXPECT_LE(img_idx.max().item<float>(), 2.f);
}

TEST(Loader, ValBatchIsRgbAndOrdered) {
  TempDir d;
  make_split(d.path(), "val", 5, 64, 64);
  auto ds =
      std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/val"}, val_options(64));
  LoaderOptions o;
  o.batch_size = 2;
  o.workers = 2;
  o.shuffle = false;
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  auto b = loader.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->paths[0], ds->image_files()[0]);
  EXPECT_EQ(b->paths[1], ds->image_files()[1]);
  ASSERT_EQ(b->targets.size(0), 2);
  // The box is pure red in BGR: channel 0 (R) is 1 and channel 2 (B) is 0 at its centre.
  const float cx = b->targets[0][2].item<float>() * 64, cy = b->targets[0][3].item<float>() * 64;
  EXPECT_NEAR(b->images[0][0][int(cy)][int(cx)].item<float>(), 1.0, 1e-6);
  EXPECT_NEAR(b->images[0][2][int(cy)][int(cx)].item<float>(), 0.0, 1e-6);
  EXPECT_TRUE(b->shapes[0].valid);
  int count = 1;
  while (loader.next()) ++count;
  EXPECT_EQ(count, 3);
  EXPECT_FALSE(loader.next());
}

TEST(Loader, EarlyDestructionDoesNotHang) {
  TempDir d;
  make_split(d.path(), "train", 12, 64, 64);
  auto ds = std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/train"},
                                          train_options(64));
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < 3; ++k) {
    LoaderOptions o;
    o.batch_size = 2;
    o.workers = 2;
    o.prefetch = 1;
    DataLoader loader(ds, o);
    loader.start_epoch(0);
    if (k > 0) loader.next();
    if (k == 2) loader.start_epoch(1);  // abandons the running epoch
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Loader, WorkerErrorReachesCallerWithFileName) {
  TempDir d;
  make_split(d.path(), "val", 6, 32, 32);
  auto ds =
      std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/val"}, val_options(32));
  const std::string victim = ds->image_files()[3];
  write_text(victim, "not an image any more");
  const int threads_before = at::get_num_threads();
  at::set_num_threads(2);  // without workers, image 3 loads on the second thread of the step
  for (int workers : {0, 2}) {
    LoaderOptions o;
    o.batch_size = 2;
    o.workers = workers;
    o.shuffle = false;
    DataLoader loader(ds, o);
    loader.start_epoch(0);
    EXPECT_TRUE(loader.next());
    try {
      loader.next();
      FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(victim), std::string::npos) << e.what();
    }
    EXPECT_FALSE(loader.next());  // the epoch ended with the error
  }
  at::set_num_threads(threads_before);
}

TEST(Loader, DistributedRanksSplitTheData) {
  TempDir d;
  make_split(d.path(), "val", 5, 32, 32);
  auto ds =
      std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/val"}, val_options(32));
  std::multiset<std::string> seen;
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions o;
    o.batch_size = 2;
    o.workers = 1;
    o.world_size = 2;
    o.rank = rank;
    DataLoader loader(ds, o);
    EXPECT_EQ(loader.num_batches(), 2u);
    loader.start_epoch(0);
    while (auto b = loader.next()) seen.insert(b->paths.begin(), b->paths.end());
  }
  EXPECT_EQ(seen.size(), 6u);  // 5 + 1 padding
  for (const auto& f : ds->image_files()) EXPECT_GE(seen.count(f), 1u);
}

TEST(Dataset, DiskCacheInReadOnlyFolderFallsBack) {
  TempDir d;
  make_split(d.path(), "val", 2, 64, 64);
  fs::permissions(d / "images/val",
                  fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  auto opt = val_options(32);
  opt.cache = "disk";
  YoloDataset ds({d / "images/val"}, opt);
  fs::permissions(d / "images/val", fs::perms::owner_write, fs::perm_options::add);
  EXPECT_TRUE(ds.options().cache.empty());
  EXPECT_FALSE(fs::exists(d / "images/val/im0.png.32-area.cache"));
  Rng rng(0);
  EXPECT_EQ(ds.get(0, rng).image.size(), cv::Size(32, 32));
}

TEST(Loader, CollatePadsMixedSizes) {
  std::vector<Sample> samples(2);
  samples[0].image = cv::Mat(32, 64, CV_8UC3, cv::Scalar(0, 0, 255));
  samples[0].labels = {{1, 0.5f, 0.5f, 0.5f, 0.5f}};
  samples[1].image = cv::Mat(64, 32, CV_8UC3, cv::Scalar(255, 0, 0));
  const Batch b = collate(samples);
  EXPECT_EQ(b.images.sizes(), (std::vector<int64_t>{2, 3, 64, 64}));
  // Same pixels: the box 16..48 x 8..24 now normalises against 64 x 64.
  EXPECT_NEAR(b.targets[0][2].item<float>(), 0.5, 1e-6);
  EXPECT_NEAR(b.targets[0][3].item<float>(), 0.25, 1e-6);
  EXPECT_NEAR(b.targets[0][5].item<float>(), 0.25, 1e-6);
  EXPECT_NEAR(b.images[0][0][40][10].item<float>(), 114 / 255.0, 1e-6);  // padding
  EXPECT_NEAR(b.images[1][2][10][10].item<float>(), 1.0, 1e-6);          // blue sample
  std::vector<Sample> again(1);
  again[0].image = cv::Mat(8, 8, CV_8UC3, cv::Scalar(10, 20, 30));
  const Batch u = collate(again, false);
  EXPECT_EQ(u.images.scalar_type(), torch::kUInt8);
  EXPECT_EQ(u.images[0][0][3][3].item<int>(), 30);  // R
  EXPECT_EQ(u.images[0][2][3][3].item<int>(), 10);  // B
}

// Training sends uint8 batches and converts them on the device: the model must see exactly the
// floats the loader's own conversion made (the recorded results depend on it), for every value.
TEST(Loader, DeviceConversionOfByteBatchesEqualsTheLoadersFloats) {
  auto make = [] {
    std::vector<Sample> samples(2);
    cv::Mat ramp(16, 16, CV_8UC3);
    for (int i = 0; i < 16 * 16 * 3; ++i) ramp.data[i] = static_cast<uint8_t>(i % 256);
    samples[0].image = ramp;
    samples[1].image = 255 - ramp;
    return samples;
  };
  std::vector<Sample> a = make(), b = make();
  const Batch floats = collate(a, true), bytes = collate(b, false);
  const at::Tensor on_device = images_to_device(bytes.images, torch::kCPU);
  EXPECT_EQ(on_device.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(on_device, floats.images));
  EXPECT_TRUE(torch::equal(images_to_device(floats.images, torch::kCPU), floats.images));
}

TEST(Loader, RectDatasetKeepsOrderAndShapes) {
  TempDir d;
  make_split(d.path(), "a", 3, 128, 64);
  make_split(d.path(), "b", 2, 64, 128);
  auto opt = val_options(128);
  opt.rect = true;
  opt.batch_size = 3;
  opt.pad = 0.5;
  auto ds =
      std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/a", d / "images/b"}, opt);
  LoaderOptions o;
  o.batch_size = 3;
  o.workers = 2;
  o.shuffle = true;  // forced off for rect
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  auto b0 = loader.next(), b1 = loader.next();
  ASSERT_TRUE(b0 && b1);
  EXPECT_EQ(b0->images.sizes(), (std::vector<int64_t>{3, 3, 96, 160}));
  EXPECT_EQ(b1->images.sizes(), (std::vector<int64_t>{2, 3, 160, 96}));
  EXPECT_EQ(b0->paths[0], ds->image_files()[0]);
}

namespace {

// n generated 64 x 48 training images in d and their augmenting dataset.
std::shared_ptr<YoloDataset> train_set(const TempDir& d, int n) {
  make_split(d.path(), "train", n, 64, 48);
  return std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/train"},
                                       train_options(64));
}

// The rest of the loader's current epoch.
std::vector<Batch> drain(DataLoader& loader) {
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

// Every batch of `epochs` from a loader with no workers, made afresh for each epoch: the
// reference a persistent, prefetching loader must reproduce.
std::vector<std::vector<Batch>> fresh_epochs(std::shared_ptr<const YoloDataset> ds, LoaderOptions o,
                                             const std::vector<int64_t>& epochs) {
  o.workers = 0;
  std::vector<std::vector<Batch>> out;
  for (int64_t e : epochs) {
    DataLoader loader(ds, o);
    loader.start_epoch(e);
    out.push_back(drain(loader));
  }
  return out;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].images, b[i].images)) << "batch " << i;
    EXPECT_TRUE(torch::equal(a[i].targets, b[i].targets)) << "batch " << i;
    EXPECT_EQ(a[i].paths, b[i].paths);
  }
}

// Reads of decoded images so far: how far the workers have got.
uint64_t image_reads(const YoloDataset& ds) {
  const ImageCache::Stats st = ds.image_cache_stats();
  return st.hits + st.misses;
}

bool wait_for(const std::function<bool()>& done, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST(Loader, PersistentWorkersPrefetchTheNextEpochWithTheSameBatches) {
  TempDir d;
  auto ds = train_set(d, 7);
  LoaderOptions o;
  o.batch_size = 3;
  o.workers = 2;
  o.seed = 5;
  const auto want = fresh_epochs(ds, o, {0, 1, 2});
  DataLoader loader(ds, o);
  for (int64_t e = 0; e < 3; ++e) {
    loader.start_epoch(e);
    expect_same(drain(loader), want[e]);
    // The consumer is away (validation, checkpoints): the workers load the next epoch meanwhile.
    // Each mosaic reads 4 images, so this epoch and those before it took 7 * 4 each.
    const uint64_t used = 7 * 4 * static_cast<uint64_t>(e + 1);
    EXPECT_TRUE(wait_for([&] { return image_reads(*ds) > used; }, 10))
        << "nothing loaded after epoch " << e;
  }
}

// Ultralytics' close_mosaic: the epoch's number decides, so the workers that run ahead into the
// first closed epoch (while the consumer validates) already letterbox its samples.
TEST(Loader, ClosedMosaicEpochsAreLetterboxedEvenWhenPrefetched) {
  TempDir d;
  make_split(d.path(), "train", 6, 64, 48);
  DatasetOptions opt = train_options(64);
  opt.close_mosaic_epoch = 1;
  auto ds = std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/train"}, opt);
  LoaderOptions o;
  o.batch_size = 3;
  o.workers = 2;
  DataLoader loader(ds, o);
  for (int64_t e = 0; e < 3; ++e) {
    loader.start_epoch(e);
    const std::vector<Batch> batches = drain(loader);
    ASSERT_EQ(batches.size(), 2u);
    for (const Batch& b : batches) {
      for (const ShapeInfo& s : b.shapes) EXPECT_EQ(s.valid, e >= 1) << "epoch " << e;
    }
    if (e == 0) {  // epoch 1's samples are made while nobody reads
      EXPECT_TRUE(wait_for([&] { return image_reads(*ds) > 6 * 4; }, 10));
    }
  }
}

TEST(Loader, NoPrefetchAcrossEpochsWhenTurnedOff) {
  TempDir d;
  auto ds = train_set(d, 6);
  LoaderOptions o;
  o.batch_size = 3;
  o.workers = 2;
  o.prefetch_next_epoch = false;
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  while (loader.next()) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(image_reads(*ds), 6u * 4);  // this epoch's mosaics only
}

TEST(Loader, AnotherEpochThanThePrefetchedOneStartsAfresh) {
  TempDir d;
  auto ds = train_set(d, 7);
  LoaderOptions o;
  o.batch_size = 2;
  o.workers = 2;
  o.seed = 3;
  const auto want = fresh_epochs(ds, o, {0, 5, 6});
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  std::vector<Batch> first;
  first.push_back(std::move(*loader.next()));
  loader.start_epoch(5);  // abandons epoch 0 midway and the work queued for it
  expect_same(drain(loader), want[1]);
  loader.start_next_epoch();  // 6, prefetched while epoch 5 ended
  expect_same(drain(loader), want[2]);
  EXPECT_TRUE(torch::equal(first[0].images, want[0][0].images));
}

TEST(Loader, StopLetsTheDatasetIndicesChange) {
  TempDir d;
  auto ds = train_set(d, 6);
  LoaderOptions o;
  o.batch_size = 2;
  o.workers = 2;
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next());
  loader.stop();  // waits for the samples in work; nothing reads the dataset now
  const uint64_t reads = image_reads(*ds);
  ds->set_indices({5, 5, 4, 4, 3, 3});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(image_reads(*ds), reads);
  EXPECT_FALSE(loader.next());  // stopped: no epoch until the next start
  const auto want = fresh_epochs(ds, o, {1});
  loader.start_epoch(1);
  expect_same(drain(loader), want[0]);
}

// --augment-device: the workers hand over recipes, the device renders them; the batches are the
// CPU path's (targets exactly, pixels within a grey level), whatever the threads.
TEST(Loader, RecipeBatchesRenderTheCpuPathsBatches) {
  TempDir d;
  make_split(d.path(), "train", 7, 96, 64);
  auto opt = train_options(64);
  opt.hyp.hsv_h = 0.015, opt.hyp.hsv_s = 0.7, opt.hyp.hsv_v = 0.4;
  opt.hyp.fliplr = 0.5;
  auto ds = std::make_shared<YoloDataset>(std::vector<std::string>{d / "images/train"}, opt);
  LoaderOptions o;
  o.batch_size = 3;
  o.workers = 2;
  o.seed = 9;
  o.float_images = false;
  DataLoader pixels(ds, o);
  o.recipes = true;
  DataLoader recipes(ds, o);
  for (int64_t e = 0; e < 2; ++e) {
    pixels.start_epoch(e);
    recipes.start_epoch(e);
    size_t n = 0;
    while (auto want = pixels.next()) {
      auto got = recipes.next();
      ASSERT_TRUE(got);
      ASSERT_TRUE(got->recipes);
      EXPECT_FALSE(got->images.defined());
      EXPECT_TRUE(torch::equal(got->targets, want->targets));
      EXPECT_EQ(got->paths, want->paths);
      const at::Tensor a = batch_images_to_device(*got, torch::kCPU);
      const at::Tensor b = batch_images_to_device(*want, torch::kCPU);
      ASSERT_EQ(a.sizes(), b.sizes());
      EXPECT_LE((a - b).abs().max().item<float>(), 1.5f / 255) << "epoch " << e << " batch " << n;
      ++n;
    }
    EXPECT_EQ(n, 3u);
    EXPECT_FALSE(recipes.next());
  }
}

namespace {
// 8 constant images (image j: 10 (j + 1)) of 4x6 px, one label each centred (image 1: two).
Batch eight_images() {
  Batch b;
  b.images = torch::empty({8, 3, 4, 6}, torch::kUInt8);
  std::vector<at::Tensor> rows;
  for (int j = 0; j < 8; ++j) {
    b.images[j].fill_(10 * (j + 1));
    rows.push_back(torch::tensor({float(j), float(j % 3), .5f, .5f, .2f, .4f}));
    if (j == 1) rows.push_back(torch::tensor({1.f, 2.f, .1f, .1f, .1f, .1f}));
    b.paths.push_back("im" + std::to_string(j));
    b.shapes.emplace_back();
  }
  b.targets = torch::stack(rows);
  return b;
}
}  // namespace

// YOLOv5's collate_fn4: per 4 samples one image of twice the size, either the first sample
// upsampled with its labels or the four as a 2x2 mosaic with their labels moved and halved.
TEST(QuadBatch, FourSamplesBecomeOneImageOfTwiceTheSize) {
  bool seen_mosaic = false, seen_upsampled = false;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const Batch q = quad_batch(eight_images(), seed);
    ASSERT_EQ(q.images.sizes(), (std::vector<int64_t>{2, 3, 8, 12}));
    EXPECT_EQ(q.images.scalar_type(), torch::kUInt8);
    EXPECT_EQ(q.paths, (std::vector<std::string>{"im0", "im1"}));
    EXPECT_TRUE(torch::equal(q.images, quad_batch(eight_images(), seed).images));  // seeded
    for (int64_t i = 0; i < 2; ++i) {
      const at::Tensor im = q.images[i];
      const at::Tensor t = q.targets.index({q.targets.select(1, 0) == i});
      const int k = 4 * static_cast<int>(i);
      const auto value = [&](int64_t y, int64_t x) { return im[0][y][x].item<int>(); };
      if (value(0, 0) != value(7, 11)) {  // the mosaic: k top left, k+1 below, k+2 right
        seen_mosaic = true;
        EXPECT_EQ(value(0, 0), 10 * (k + 1));
        EXPECT_EQ(value(7, 0), 10 * (k + 2));
        EXPECT_EQ(value(0, 11), 10 * (k + 3));
        EXPECT_EQ(value(7, 11), 10 * (k + 4));
        ASSERT_EQ(t.size(0), i == 0 ? 5 : 4);
        // Sample k+1's label: one image down, halved.
        const at::Tensor below = t.index({t.select(1, 1) == float((k + 1) % 3)});
        EXPECT_TRUE(torch::allclose(below[0].slice(0, 2), torch::tensor({.25f, .75f, .1f, .2f})));
      } else {  // sample k upsampled, its labels as they were
        seen_upsampled = true;
        EXPECT_TRUE(torch::all(im == 10 * (k + 1)).item<bool>());
        ASSERT_EQ(t.size(0), i == 0 ? 1 : 1);
        EXPECT_TRUE(torch::allclose(t[0].slice(0, 2), torch::tensor({.5f, .5f, .2f, .4f})));
      }
    }
  }
  EXPECT_TRUE(seen_mosaic && seen_upsampled);
  // Fewer than four samples: as they were.
  Batch three = eight_images();
  three.images = three.images.slice(0, 0, 3);
  EXPECT_EQ(quad_batch(three, 0).images.size(0), 3);
}

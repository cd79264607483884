#pragma once
// An epoch's running mean of the box, obj and cls losses, kept on the training device so that the
// step never waits for it. A step whose loss is not finite (a float16 forward that overflowed,
// whose step the gradient scaler skips) is left out of the mean and counted instead: the run can
// go on as YOLOv5's does, and stop only when the loss stays non-finite. read() is the one copy to
// the host.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace yolo {

class RunningLoss {
 public:
  explicit RunningLoss(const c10::Device& device);

  // A new epoch: the mean and its count start again; the run of non-finite steps carries over.
  void start_epoch();
  // One step's (3) loss items, on the device: a few small kernels, no host read.
  void add(const at::Tensor& items);
  // Copies the state to the host; the accessors below show it as of this read.
  void read();

  // (3) float on the CPU: the mean over the epoch's finite steps (zeros before the first).
  const at::Tensor& mean() const { return mean_; }
  // The epoch's mean for results.csv: mean(), or NaN when no step of the epoch was finite.
  double epoch_mean(int k) const;
  int64_t finite_steps() const { return finite_; }
  // Steps in a row, ending with the last one added before the read, whose loss was not finite.
  int64_t nonfinite_run() const { return run_; }

 private:
  at::Tensor state_;  // (5) float on the device: mean (3), finite steps, non-finite run
  at::Tensor mean_;   // host copy of the mean
  int64_t finite_ = 0, run_ = 0;
};

}  // namespace yolo

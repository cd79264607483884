#pragma once
// Single-process multi-GPU training as torch.nn.DataParallel does it: each step the batch is split
// across the devices, every replica gets the master's weights and buffers, the replicas run in
// parallel threads, and their raw outputs are gathered on the first device (differentiably), where
// the loss runs over the whole batch. BatchNorm statistics are per device; the master keeps those
// of its own chunk. After backward, reduce_grads() adds the replicas' gradients to the master's.
// LibTorch's own data_parallel needs a Cloneable module, which a YAML-built model is not.
#include <torch/types.h>

#include <vector>

#include "models/yolo.h"

namespace yolo {

class DataParallel {
 public:
  // `devices[0]` holds `master`; replicas are built from its spec on the others.
  DataParallel(DetectionModel master, std::vector<torch::Device> devices);

  // Raw maps per level for the whole batch, on devices[0]. The batch splits as torch.chunk does.
  std::vector<torch::Tensor> forward(const torch::Tensor& images);
  // Adds the replicas' accumulated gradients to the master's parameters and clears them.
  void reduce_grads();
  size_t num_devices() const { return devices_.size(); }
  // The replica on devices_[i + 1].
  const DetectionModel& replica(size_t i) const { return replicas_.at(i); }

 private:
  void sync_replicas();

  // A module's parameters and buffers, listed once (the tensors stay the same objects).
  struct State {
    std::vector<torch::Tensor> params, buffers;
  };

  DetectionModel master_;
  std::vector<DetectionModel> replicas_;  // on devices_[1..]
  std::vector<torch::Device> devices_;
  State master_state_;
  std::vector<State> replica_state_;
};

}  // namespace yolo

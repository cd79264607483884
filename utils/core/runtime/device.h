#pragma once
// --device selection as YOLOv5's select_device: '' (first GPU if any, else CPU), 'cpu', '0',
// '0,1'. Asking for CUDA where there is none, or for a GPU index that does not exist, is an error.
#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace yolo {

struct DeviceSelection {
  c10::Device device{c10::kCPU};
  std::vector<int> cuda_ids;  // the GPUs named (empty on CPU)
  std::string description;    // e.g. "CPU" or "CUDA:0 (NVIDIA H100, 81559MiB)"
  bool listed = false;        // the GPUs were named in --device (not chosen by '')
};

// `batch_size` > 0 also checks that it divides by the number of GPUs (DataParallel split).
// Throws UsageError naming --device.
DeviceSelection select_device(const std::string& spec, int batch_size = 0);

// The GPU of one DDP rank: the `local_rank`-th GPU listed in --device (`--device 2,3`: local rank
// 1 trains on cuda:3, as YOLOv5's CUDA_VISIBLE_DEVICES=2,3 does), or cuda:LOCAL_RANK when none were
// listed. `visible_gpus` is torch::cuda::device_count(). With fewer GPUs than local ranks it
// throws UsageError ("insufficient CUDA devices for DDP command"), unless `share` (Gloo, which
// can): then local rank i takes GPU i mod the number of GPUs. NCCL needs a GPU per rank.
DeviceSelection rank_device(const DeviceSelection& sel, int local_rank, int local_world_size,
                            int visible_gpus, bool share = false);

// Parses "0,1" into {0, 1}; "" gives {}. Throws UsageError on anything else.
std::vector<int> parse_device_ids(const std::string& spec);

}  // namespace yolo

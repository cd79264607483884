#include "utils/core/runtime/device.h"

#include <torch/cuda.h>

#include <algorithm>
#include <cctype>

#include "utils/core/errors.h"

namespace yolo {

namespace {
std::string normalize(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }),
          s.end());
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s.rfind("cuda:", 0) == 0) s = s.substr(5);
  if (s == "none") s.clear();
  return s;
}
}  // namespace

std::vector<int> parse_device_ids(const std::string& raw) {
  const std::string s = normalize(raw);
  std::vector<int> ids;
  if (s.empty()) return ids;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string tok =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (tok.empty() || tok.size() > 3 ||
        !std::all_of(tok.begin(), tok.end(), [](unsigned char c) { return std::isdigit(c); })) {
      throw UsageError("--device: '" + raw +
                       "' is not valid; use '' (auto), 'cpu', or CUDA indices such as 0 or 0,1");
    }
    const int id = std::stoi(tok);
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
      throw UsageError("--device: GPU " + tok + " is listed twice in '" + raw + "'");
    }
    ids.push_back(id);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

DeviceSelection select_device(const std::string& spec, int batch_size) {
  DeviceSelection sel;
  const std::string s = normalize(spec);
  if (s == "cpu") {
    sel.description = "CPU";
    return sel;
  }
  if (s == "mps")
    throw UsageError("--device: 'mps' is not available here; use 'cpu' or a GPU index");
  std::vector<int> ids = parse_device_ids(s);
  const bool cuda = torch::cuda::is_available();
  const int count = cuda ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (!ids.empty()) {
    const int max_id = *std::max_element(ids.begin(), ids.end());
    if (!cuda || max_id >= count) {
      throw UsageError("--device: Invalid CUDA '--device " + spec +
                       "' requested, use '--device cpu' or pass valid CUDA device(s) (this machine "
                       "has " +
                       std::to_string(count) + " CUDA device(s))");
    }
  } else if (cuda && count > 0) {
    ids = {0};
  }
  if (ids.empty()) {
    sel.description = "CPU";
    return sel;
  }
  const int n = static_cast<int>(ids.size());
  if (n > 1 && batch_size > 0 && batch_size % n != 0) {
    throw UsageError("--batch-size " + std::to_string(batch_size) + " not multiple of GPU count " +
                     std::to_string(n));
  }
  sel.cuda_ids = ids;
  sel.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(ids[0]));
  sel.description = "CUDA:" + s;
  sel.listed = !s.empty();
  return sel;
}

DeviceSelection rank_device(const DeviceSelection& sel, int local_rank, int local_world_size,
                            int visible_gpus, bool share) {
  const int available = sel.listed ? static_cast<int>(sel.cuda_ids.size()) : visible_gpus;
  if (available < 1 || (!share && (available <= local_rank || available < local_world_size))) {
    throw UsageError(
        "insufficient CUDA devices for DDP command: " + std::to_string(local_world_size) +
        " local ranks (LOCAL_RANK " + std::to_string(local_rank) + ") but " +
        (sel.listed ? "--device lists " : "this machine has ") + std::to_string(available) +
        " GPU(s); use --nproc_per_node <= " + std::to_string(available) +
        (sel.listed ? ", list one GPU per local rank in --device," : "") +
        " or --dist-backend gloo to let ranks share GPUs");
  }
  const int slot = local_rank % available;
  const int id = sel.listed ? sel.cuda_ids[static_cast<size_t>(slot)] : slot;
  DeviceSelection out;
  out.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(id));
  out.cuda_ids = {id};
  out.description = "CUDA:" + std::to_string(id);
  out.listed = sel.listed;
  return out;
}

}  // namespace yolo

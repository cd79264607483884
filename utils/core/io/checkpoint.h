#pragma once
// Training checkpoints (docs/ARCHITECTURE.md contract): a zip-format pickle of a dict with `epoch`,
// `best_fitness`, `model` (name -> tensor, the EMA weights), `optimizer` (None once stripped),
// `ema_updates`, `opt` and `hyp` (YAML text) and `date`; what makes the file self-contained:
// `model_yaml` (the architecture's YAML text), `nc` and `names` (the classes it detects); while
// training, also `train_model` and `last_opt_step` for an exact --resume. Files written before
// `model_yaml`/`nc`/`names` existed load with them empty. Python's torch.load reads them; writes
// are atomic (temporary file + rename), so a crash never leaves a broken file.
#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace yolo {

struct Checkpoint {
  int64_t epoch = -1;
  double best_fitness = 0.0;
  std::map<std::string, at::Tensor> model;
  // For resuming: the raw (non-EMA) weights and the iteration of the last optimizer step. Both
  // go with the optimizer state when a checkpoint is stripped.
  std::map<std::string, at::Tensor> train_model;
  int64_t last_opt_step = -1;
  c10::IValue optimizer;  // None when stripped
  int64_t ema_updates = 0;
  std::string opt;  // opt.yaml text
  std::string hyp;  // hyp.yaml text
  std::string date;
  std::string model_yaml;          // the model YAML's text ('' in older files)
  int64_t nc = 0;                  // 0 in older files
  std::vector<std::string> names;  // empty in older files
  bool has_optimizer() const { return !optimizer.isNone(); }
};

// Reads a zip-format torch.save file (what checkpoints and weights files are) into an IValue.
// LibTorch's unpickler builds tensors and plain values only and resolves no Python globals, so a
// pickle that names code (GLOBAL os.system + REDUCE, INST, ...) is refused and nothing runs.
// Errors name `path`, say why (not a zip, truncated, newer format, code) and what to do; `kind` is
// "checkpoint" or "weights file" for the messages, `hint` is appended to generic read errors.
c10::IValue read_pickle_archive(const std::string& path, const std::string& kind,
                                const std::string& hint = "");

// torch::pickle_save without type tags: LibTorch marks typed dicts and lists with a call to
// torch.jit._pickle.restore_type_tag, a global that Python's torch.load refuses by default since
// PyTorch 2.6 (weights_only=True). Untagged, the zip holds only plain dicts, lists, strings,
// numbers and tensors, which torch.load and read_pickle_archive both take as they are.
std::vector<char> pickle_save_plain(const c10::IValue& value);

// `v` with `f` applied to every tensor in it; dicts, lists and tuples are rebuilt (element types
// and order kept), other values shared.
c10::IValue map_tensors(const c10::IValue& v,
                        const std::function<at::Tensor(const at::Tensor&)>& f);

// The file save_checkpoint writes: tensors as they are (dtype kept), on the host, contiguous; an
// empty `date` is now. CheckpointWriter writes these bytes too, from its own thread.
std::string checkpoint_bytes(const Checkpoint& ckpt);
void save_checkpoint(const Checkpoint& ckpt, const std::string& path);
// Throws std::runtime_error naming the file when it is missing, not a checkpoint, or truncated.
Checkpoint load_checkpoint(const std::string& path);
// YOLOv5's strip_optimizer: drops the optimizer state, stores the weights as float16 and rewrites
// the file in place. load_checkpoint gives them back as float32.
void strip_optimizer(const std::string& path);

// Current local time as YOLOv5 writes it (ISO 8601).
std::string now_iso8601();

}  // namespace yolo

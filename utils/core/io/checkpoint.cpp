#include "utils/core/io/checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/torch.h>

#include <ctime>

#include "utils/core/fs_atomic.h"
#include "utils/core/io/torch_archive.h"

namespace yolo {
namespace {

// torch::pickle_load on the bounded adapter: the same archive layout and unpickler.
c10::IValue pickle_load_bounded(const std::vector<char>& bytes) {
  const auto reader = open_torch_zip(bytes);
  return torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                           /*type_resolver=*/c10::nullopt,
                                           /*obj_loader=*/c10::nullopt, /*device=*/c10::nullopt,
                                           *reader);
}

}  // namespace

std::vector<char> pickle_save_plain(const c10::IValue& value) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    const char* b = static_cast<const char*>(bytes);
    archive.insert(archive.end(), b, b + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  return archive;
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

c10::IValue map_tensors(const c10::IValue& v,
                        const std::function<at::Tensor(const at::Tensor&)>& f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isGenericDict()) {
    const auto d = v.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), d.valueType());
    for (const auto& kv : d) out.insert(kv.key(), map_tensors(kv.value(), f));
    return out;
  }
  if (v.isList()) {
    const auto l = v.toList();
    c10::impl::GenericList out(l.elementType());
    for (const c10::IValue& e : l) out.push_back(map_tensors(e, f));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(map_tensors(e, f));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  return v;
}

std::string checkpoint_bytes(const Checkpoint& c) {
  c10::Dict<std::string, at::Tensor> model;
  for (const auto& [k, t] : c.model) model.insert(k, t.detach().cpu().contiguous());
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("epoch", c.epoch);
  d.insert("best_fitness", c.best_fitness);
  d.insert("model", model);
  // Tensors the caller also holds would be memoized by the pickler (it memoizes what is shared),
  // so fresh handles keep the bytes independent of who else holds the optimizer's buffers.
  d.insert("optimizer", map_tensors(c.optimizer, [](const at::Tensor& t) {
             return t.defined() ? t.detach().cpu().contiguous() : t;
           }));
  if (c.has_optimizer() && !c.train_model.empty()) {
    c10::Dict<std::string, at::Tensor> raw;
    for (const auto& [k, t] : c.train_model) raw.insert(k, t.detach().cpu().contiguous());
    d.insert("train_model", raw);
    d.insert("last_opt_step", c.last_opt_step);
  }
  d.insert("ema_updates", c.ema_updates);
  d.insert("opt", c.opt);
  d.insert("hyp", c.hyp);
  d.insert("date", c.date.empty() ? now_iso8601() : c.date);
  if (!c.model_yaml.empty()) d.insert("model_yaml", c.model_yaml);
  if (c.nc > 0) d.insert("nc", c.nc);
  if (!c.names.empty()) {
    c10::impl::GenericList names(c10::StringType::get());
    for (const std::string& n : c.names) names.push_back(n);
    d.insert("names", names);
  }
  const std::vector<char> bytes = pickle_save_plain(c10::IValue(d));
  return std::string(bytes.begin(), bytes.end());
}

void save_checkpoint(const Checkpoint& c, const std::string& path) {
  write_file_atomic(path, checkpoint_bytes(c));
}

c10::IValue read_pickle_archive(const std::string& path, const std::string& kind,
                                const std::string& hint) {
  const std::vector<char> bytes = read_torch_zip_bytes(path, kind, hint);
  try {
    return pickle_load_bounded(bytes);
  } catch (const std::exception& e) {
    throw_archive_error(path, kind, hint, e);
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  const c10::IValue v = read_pickle_archive(path, "checkpoint");
  if (!v.isGenericDict()) throw std::runtime_error(path + ": not a checkpoint dict");
  const auto d = v.toGenericDict();
  auto need = [&](const char* key) {
    if (!d.contains(key)) throw std::runtime_error(path + ": checkpoint has no '" + key + "'");
    return d.at(key);
  };
  Checkpoint c;
  try {
    c.epoch = need("epoch").toInt();
    c.best_fitness = need("best_fitness").toDouble();
    for (const auto& kv : need("model").toGenericDict()) {
      // Stripped weights are float16 on disk (as YOLOv5 saves them); training and inference
      // take float32.
      const at::Tensor t = kv.value().toTensor();
      c.model[kv.key().toStringRef()] = t.scalar_type() == at::kHalf ? t.to(at::kFloat) : t;
    }
    c.optimizer = d.contains("optimizer") ? d.at("optimizer") : c10::IValue();
    if (d.contains("train_model")) {
      for (const auto& kv : d.at("train_model").toGenericDict()) {
        c.train_model[kv.key().toStringRef()] = kv.value().toTensor();
      }
    }
    if (d.contains("last_opt_step")) c.last_opt_step = d.at("last_opt_step").toInt();
    c.ema_updates = d.contains("ema_updates") ? d.at("ema_updates").toInt() : 0;
    c.opt = d.contains("opt") && d.at("opt").isString() ? d.at("opt").toStringRef() : "";
    c.hyp = d.contains("hyp") && d.at("hyp").isString() ? d.at("hyp").toStringRef() : "";
    c.date = d.contains("date") && d.at("date").isString() ? d.at("date").toStringRef() : "";
    if (d.contains("model_yaml") && d.at("model_yaml").isString()) {
      c.model_yaml = d.at("model_yaml").toStringRef();
    }
    if (d.contains("nc") && d.at("nc").isInt()) c.nc = d.at("nc").toInt();
    if (d.contains("names") && d.at("names").isList()) {
      for (const c10::IValue& n : d.at("names").toListRef()) {
        if (!n.isString()) throw std::runtime_error(path + ": 'names' holds a non-string");
        c.names.push_back(n.toStringRef());
      }
    }
  } catch (const c10::Error& e) {
    throw std::runtime_error(path + ": malformed checkpoint entry (" +
                             std::string(e.what_without_backtrace()) + ")");
  }
  return c;
}

void strip_optimizer(const std::string& path) {
  Checkpoint c = load_checkpoint(path);
  c.optimizer = c10::IValue();
  c.train_model.clear();
  for (auto& [name, t] : c.model) {
    if (t.is_floating_point()) t = t.to(at::kHalf);  // half the size, as YOLOv5's model.half()
  }
  save_checkpoint(c, path);
}

}  // namespace yolo

#include "utils/checkpoint.h"

#include <torch/torch.h>

#include <ctime>
#include <fstream>
#include <iterator>

#include "utils/fs_atomic.h"

namespace yolo {

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

void save_checkpoint(const Checkpoint& c, const std::string& path) {
  c10::Dict<std::string, at::Tensor> model;
  for (const auto& [k, t] : c.model) model.insert(k, t.detach().cpu().contiguous());
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("epoch", c.epoch);
  d.insert("best_fitness", c.best_fitness);
  d.insert("model", model);
  d.insert("optimizer", c.optimizer);
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
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(d));
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the checkpoint (does it exist?)");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  if (bytes.size() < 4 || bytes[0] != 'P' || bytes[1] != 'K') {
    throw std::runtime_error(path + ": not a checkpoint (expected a zip-format torch.save file)");
  }
  c10::IValue v;
  try {
    v = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw std::runtime_error(path + ": cannot read the checkpoint (" +
                             what.substr(0, what.find('\n')) + "); the file may be truncated");
  }
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
      c.model[kv.key().toStringRef()] = kv.value().toTensor();
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
  save_checkpoint(c, path);
}

}  // namespace yolo

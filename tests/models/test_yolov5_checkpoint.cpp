// YOLOv5's own .pt files, written here opcode by opcode as Python's pickler (protocol 2) writes a
// torch.save of {'model': DetectionModel, ...}: the reader takes their weights, architecture and
// class names, refuses any global outside its allow-list without running it, refuses tensors that
// reach past their storage, and survives truncation, mutation and absurd nesting. The same files
// made by YOLOv5 itself are checked in tests/interop/test_yolov5_weights.py.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "models/unpickler.h"
#include "models/weights.h"
#include "models/yolo.h"
#include "models/yolov5_checkpoint.h"
#include "utils/core/paths.h"

namespace fs = std::filesystem;
using namespace std::string_literals;

namespace {

std::string u32(uint32_t n) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

// Python's pickler, protocol 2, for the values a YOLOv5 checkpoint holds.
struct Pickle {
  std::string out = "\x80\x02";
  std::map<std::string, std::string> storages;  // record key -> bytes
  std::string extra_global;         // a global to plant in the model's attributes (hostile files)
  int64_t storage_numel_bonus = 0;  // claims more elements than a record holds

  void str(const std::string& s) { out += "X" + u32(static_cast<uint32_t>(s.size())) + s; }
  void integer(int64_t v) { out += "J" + u32(static_cast<uint32_t>(v)); }
  void global(const std::string& module, const std::string& name) {
    out += "c" + module + "\n" + name + "\n";
  }
  void ordered_dict_begin() {
    global("collections", "OrderedDict");
    out += ")R(";  // OrderedDict(), then MARK for SETITEMS
  }
  void object_begin(const std::string& cls) {
    const auto dot = cls.rfind('.');
    global(cls.substr(0, dot), cls.substr(dot + 1));
    out += ")\x81}(";  // NEWOBJ, then the state dict's items
  }
  void object_end() { out += "ub"; }  // SETITEMS, BUILD

  void tensor(const at::Tensor& t, bool parameter) {
    const at::Tensor h = t.detach().contiguous();
    const std::string key = std::to_string(storages.size());
    const std::string type = h.is_floating_point() ? "HalfStorage" : "LongStorage";
    const at::Tensor data = h.is_floating_point() ? h.to(at::kHalf) : h.to(at::kLong);
    storages[key] = std::string(static_cast<const char*>(data.data_ptr()), data.nbytes());
    if (parameter) {  // _rebuild_parameter(tensor, requires_grad, hooks)
      global("torch._utils", "_rebuild_parameter");
      out += "(";
    }
    global("torch._utils", "_rebuild_tensor_v2");
    out += "((";  // MARK for the arguments, MARK for the persistent id
    str("storage");
    global("torch", type);
    str(key);
    str("cpu");
    integer(h.numel() + storage_numel_bonus);
    out += "tQ";
    integer(0);
    out += "(";
    for (int64_t s : h.sizes()) integer(s);
    out += "t(";
    for (int64_t s : h.strides()) integer(s);
    out += "t\x89";
    ordered_dict_begin();
    out += "utR";
    if (parameter) {
      out += "\x88";
      ordered_dict_begin();
      out += "utR";
    }
  }

  // YAML as Python's yaml.safe_load gives it: ints, floats, strings, lists and dicts.
  void yaml(const YAML::Node& n) {
    if (n.IsMap()) {
      out += "}(";
      for (const auto& kv : n) {
        str(kv.first.Scalar());
        yaml(kv.second);
      }
      out += "u";
    } else if (n.IsSequence()) {
      out += "](";
      for (const auto& e : n) yaml(e);
      out += "e";
    } else {
      const std::string s = n.Scalar();
      char* end = nullptr;
      const long v = std::strtol(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0') {
        integer(v);
        return;
      }
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') {
        out += "G";
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        for (int i = 7; i >= 0; --i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
        return;
      }
      str(s);
    }
  }
};

// A node of the module tree that the dotted state_dict names describe.
struct ModuleNode {
  std::map<std::string, at::Tensor> params, buffers;
  std::map<std::string, ModuleNode> children;
};

bool is_buffer(const std::string& leaf) {
  return leaf == "running_mean" || leaf == "running_var" || leaf == "num_batches_tracked" ||
         leaf == "anchors";
}

ModuleNode module_tree(const yolo::StateDict& sd) {
  ModuleNode root;
  for (const auto& [name, t] : sd) {
    ModuleNode* n = &root;
    size_t start = 0;
    for (size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1) {
      n = &n->children[name.substr(start, dot - start)];
    }
    const std::string leaf = name.substr(start);
    (is_buffer(leaf) ? n->buffers : n->params)[leaf] = t;
  }
  return root;
}

void write_module(Pickle& p, const ModuleNode& m, const std::string& cls, bool top) {
  p.object_begin(cls);
  p.str("training");
  p.out += "\x89";
  p.str("_parameters");
  p.ordered_dict_begin();
  for (const auto& [k, t] : m.params) {
    p.str(k);
    p.tensor(t, true);
  }
  p.out += "u";
  p.str("_buffers");
  p.ordered_dict_begin();
  for (const auto& [k, t] : m.buffers) {
    p.str(k);
    p.tensor(t, false);
  }
  if (m.buffers.count("anchors")) {  // Detect: a non-persistent buffer state_dict() leaves out
    p.str("scratch");
    p.tensor(torch::ones({5}), false);
  }
  p.out += "u";
  p.str("_non_persistent_buffers_set");
  p.global("__builtin__", "set");
  p.out += "](";
  if (m.buffers.count("anchors")) p.str("scratch");
  p.out += "e\x85R";
  p.str("_modules");
  p.ordered_dict_begin();
  for (const auto& [k, child] : m.children) {
    p.str(k);
    write_module(p, child,
                 top ? "torch.nn.modules.container.Sequential" : "yolov5.models.common.Conv",
                 false);
  }
  p.out += "u";
  if (!p.extra_global.empty() && top) {
    p.str("planted");
    const auto dot = p.extra_global.rfind('.');
    p.global(p.extra_global.substr(0, dot), p.extra_global.substr(dot + 1));
    p.out += "(";
    p.str("touch " + (fs::temp_directory_path() / "yolov5_pwned").string());
    p.out += "tR";
  }
  p.object_end();
}

struct FileSpec {
  bool names_as_dict = true;
  bool with_ema = false;
  std::string extra_global;
  int64_t storage_numel_bonus = 0;
};

// A stripped best.pt (or, with_ema, an unstripped last.pt whose EMA is twice the weights).
std::string yolov5_file_bytes(const yolo::StateDict& sd, const std::string& cfg_path,
                              const FileSpec& spec) {
  Pickle p;
  p.extra_global = spec.extra_global;
  p.storage_numel_bonus = spec.storage_numel_bonus;
  auto model = [&](const yolo::StateDict& weights) {
    const ModuleNode tree = module_tree(weights);
    p.object_begin("yolov5.models.yolo.DetectionModel");
    p.str("training");
    p.out += "\x89";
    p.str("_parameters");
    p.ordered_dict_begin();
    p.out += "u";
    p.str("_modules");
    p.ordered_dict_begin();
    p.str("model");
    write_module(p, tree.children.at("model"), "torch.nn.modules.container.Sequential", true);
    p.out += "u";
    p.str("yaml");
    p.yaml(YAML::LoadFile(cfg_path));
    p.str("names");
    if (spec.names_as_dict) {
      p.out += "}(";
      for (int i = 0; i < 2; ++i) {
        p.integer(i);
        p.str(i ? "dog" : "cat");
      }
      p.out += "u";
    } else {
      p.out += "](";
      p.str("cat");
      p.str("dog");
      p.out += "e";
    }
    p.str("nc");
    p.integer(2);
    p.str("stride");
    p.tensor(torch::tensor({8.0, 16.0, 32.0}), false);
    p.object_end();
  };
  p.out += "}(";
  p.str("epoch");
  p.integer(spec.with_ema ? 7 : -1);
  p.str("best_fitness");
  p.out += "N";
  p.str("model");
  model(sd);
  p.str("ema");
  if (spec.with_ema) {
    yolo::StateDict plus;
    for (const auto& [k, t] : sd) plus[k] = t.is_floating_point() ? t * 2 : t;
    model(plus);
  } else {
    p.out += "N";
  }
  p.str("optimizer");
  if (spec.with_ema) {  // {'param_groups': [{'lr': 0.01}]}
    p.out += "}(";
    p.str("param_groups");
    p.out += "](}(";
    p.str("lr");
    p.yaml(YAML::Load("0.01"));
    p.out += "ueu";
  } else {
    p.out += "N";
  }
  p.str("date");
  p.str("2026-11-24T10:00:00");
  p.out += "u.";
  std::vector<char> zip;
  caffe2::serialize::PyTorchStreamWriter w([&](const void* b, size_t n) {
    zip.insert(zip.end(), static_cast<const char*>(b), static_cast<const char*>(b) + n);
    return n;
  });
  w.writeRecord("data.pkl", p.out.data(), p.out.size());
  w.writeRecord("byteorder", "little", 6);
  for (const auto& [k, bytes] : p.storages) w.writeRecord("data/" + k, bytes.data(), bytes.size());
  w.writeEndOfFile();
  return std::string(zip.begin(), zip.end());
}

class Yolov5CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("yolo_v5ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    cfg_ = yolo::project_root() + "/configs/models/yolov5n.yaml";
    torch::manual_seed(3);
    model_ = yolo::build_model(cfg_, 2);
    // Half-precision values, so the float32 read back is exact.
    torch::NoGradGuard no_grad;
    for (auto& p : model_->parameters()) p.copy_(p.to(at::kHalf).to(at::kFloat));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const FileSpec& spec) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << yolov5_file_bytes(yolo::state_dict(*model_), cfg_, spec);
    return p;
  }
  std::string refusal(const std::string& path) {
    try {
      yolo::read_weights_file(path);
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "accepted " << path;
    return "";
  }
  fs::path dir_;
  std::string cfg_;
  yolo::DetectionModel model_{nullptr};
};

}  // namespace

TEST_F(Yolov5CheckpointTest, GivesWeightsArchitectureAndNames) {
  for (bool as_dict : {true, false}) {
    SCOPED_TRACE(as_dict ? "names as a dict" : "names as a list");
    FileSpec spec;
    spec.names_as_dict = as_dict;
    const std::string path = write("best.pt", spec);
    const yolo::WeightsFile wf = yolo::read_weights_file(path);
    ASSERT_TRUE(wf.yolov5.has_value());
    const yolo::Yolov5Checkpoint& ck = *wf.yolov5;
    EXPECT_EQ(ck.model_class, "yolov5.models.yolo.DetectionModel");
    EXPECT_EQ(ck.names, (std::vector<std::string>{"cat", "dog"}));
    EXPECT_EQ(ck.nc, 2);
    EXPECT_EQ(ck.stride, (std::vector<double>{8, 16, 32}));
    EXPECT_FALSE(ck.has_optimizer);
    EXPECT_TRUE(ck.ema.empty());
    // Every state_dict entry, float32 and equal; the non-persistent buffer left out.
    const yolo::StateDict own = yolo::state_dict(*model_);
    EXPECT_EQ(wf.weights.size(), own.size());
    for (const auto& [k, t] : own) {
      ASSERT_TRUE(wf.weights.count(k)) << k;
      EXPECT_EQ(wf.weights.at(k).scalar_type(), t.scalar_type()) << k;
      EXPECT_TRUE(torch::equal(wf.weights.at(k), t)) << k;
    }
    // The pickled yaml builds the same architecture, which takes every entry.
    yolo::DetectionModel rebuilt(yolo::parse_model_spec_string(ck.model_yaml, path), 2);
    const yolo::LoadReport r = yolo::load_state_dict(*rebuilt, wf.weights);
    EXPECT_EQ(r.transferred, r.total);
    EXPECT_EQ(r.unexpected, 0);
    model_->eval();
    rebuilt->eval();
    const torch::Tensor x = torch::rand({1, 3, 64, 64});
    EXPECT_TRUE(torch::equal(model_->forward(x).pred, rebuilt->forward(x).pred));
  }
}

// Fine-tuning on data with another class count: all but Detect's six output tensors transfer, as
// YOLOv5's "Transferred 343/349 items"; with --cfg the anchors stay the YAML's.
TEST_F(Yolov5CheckpointTest, AnotherClassCountSkipsDetectOutputs) {
  const std::string path = write("best.pt", {});
  const yolo::WeightsFile wf = yolo::read_weights_file(path);
  yolo::DetectionModel m(yolo::parse_model_spec_string(wf.yolov5->model_yaml, path), 5);
  yolo::LoadReport r = yolo::load_weights(*m, wf, path);
  EXPECT_EQ(r.total, 349);
  EXPECT_EQ(r.transferred, 343);
  EXPECT_EQ(r.mismatched, 6);
  r = yolo::load_weights(*m, wf, path, {"anchor"});
  EXPECT_EQ(r.transferred, 342);
}

TEST_F(Yolov5CheckpointTest, UnstrippedFileTrainsFromModelAndInfersWithEma) {
  FileSpec spec;
  spec.with_ema = true;
  const yolo::WeightsFile wf = yolo::read_weights_file(write("last.pt", spec));
  ASSERT_TRUE(wf.yolov5.has_value());
  EXPECT_TRUE(wf.yolov5->has_optimizer);
  EXPECT_EQ(wf.yolov5->epoch, 7);
  const std::string k = "model.24.m.0.bias";
  EXPECT_TRUE(torch::equal(wf.weights.at(k), yolo::state_dict(*model_).at(k)));
  EXPECT_TRUE(torch::equal(wf.yolov5->inference_weights().at(k), wf.weights.at(k) * 2));
}

TEST_F(Yolov5CheckpointTest, PlantedGlobalsAreRefusedUnrun) {
  const fs::path marker = fs::temp_directory_path() / "yolov5_pwned";
  fs::remove(marker);
  for (const char* g : {"os.system", "builtins.eval", "subprocess.call", "models.yolo..x",
                        "torch.load", "yolov5.utils.general.check_requirements"}) {
    SCOPED_TRACE(g);
    FileSpec spec;
    spec.extra_global = g;
    const std::string m = refusal(write("hostile.pt", spec));
    EXPECT_NE(m.find(std::string("refused: the pickle names ") + g), std::string::npos) << m;
    EXPECT_NE(m.find("never executes code"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(marker));
  // An allowed record class called with arguments is only recorded, never constructed.
  FileSpec spec;
  spec.extra_global = "yolov5.models.common.Conv";
  EXPECT_TRUE(yolo::read_weights_file(write("record.pt", spec)).yolov5.has_value());
}

TEST_F(Yolov5CheckpointTest, WrongTensorSizesAreRefused) {
  FileSpec spec;
  spec.storage_numel_bonus = 1;
  EXPECT_NE(refusal(write("short.pt", spec)).find("wrong tensor sizes"), std::string::npos);
  // A view past the end of a correct storage: (offset 0, size 10, stride 1) over 5 elements.
  const std::string pkl = "\x80\x02"s + "ctorch._utils\n_rebuild_tensor_v2\n((X" + u32(7) +
                          "storage" + "ctorch\nFloatStorage\nX" + u32(1) + "0X" + u32(3) +
                          "cpuK\x05tQK\x00K\x0a\x85K\x01\x85\x89"s +
                          "ccollections\nOrderedDict\n)RtR.";
  const std::string path = (dir_ / "view.pt").string();
  {
    caffe2::serialize::PyTorchStreamWriter w(path);
    const float data[5] = {1, 2, 3, 4, 5};
    w.writeRecord("data.pkl", pkl.data(), pkl.size());
    w.writeRecord("data/0", data, sizeof(data));
    w.writeEndOfFile();
  }
  const std::string m = refusal(path);
  EXPECT_NE(m.find("wrong tensor sizes"), std::string::npos) << m;
}

TEST_F(Yolov5CheckpointTest, TruncatedAtEveryLengthIsRefused) {
  const std::string path = write("best.pt", {});
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = (dir_ / "cut.pt").string();
  const size_t step = std::max<size_t>(1, bytes.size() / 150);
  for (size_t n = 0; n < bytes.size(); n += step) {
    SCOPED_TRACE(n);
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << bytes.substr(0, n);
    refusal(cut);
  }
}

// Random byte changes in data.pkl: each file is read or refused with the file named, never a
// crash, a hang or another exception type (the libFuzzer target fuzz_pickle goes further).
TEST_F(Yolov5CheckpointTest, MutatedPicklesReadOrAreRefused) {
  const std::string path = write("best.pt", {});
  const auto reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  const auto [ptr, n] = reader->getRecord("data.pkl");
  const std::string pkl(static_cast<const char*>(ptr.get()), n);
  std::mt19937 rng(11);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = pkl;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) m[rng() % m.size()] = static_cast<char>(rng() & 0xFF);
    try {
      yolo::unpickle_bytes(m, "mutant.pkl", yolo::is_yolov5_checkpoint_global);
    } catch (const std::runtime_error& e) {
      ++refused;
      ASSERT_NE(std::string(e.what()).find("mutant.pkl"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(refused, 0);
}

TEST_F(Yolov5CheckpointTest, DeepAndCyclicPicklesEndCleanly) {
  const yolo::GlobalPolicy none = [](const std::string&) { return false; };
  // A million nested lists: built and freed without recursion.
  std::string deep = "\x80\x02";
  for (int i = 0; i < 1000000; ++i) deep += "]";
  for (int i = 0; i < 999999; ++i) deep += "a";
  deep += ".";
  EXPECT_EQ(yolo::unpickle_bytes(deep, "deep.pkl", none)->items.size(), 1u);
  // A list that holds itself.
  const std::string cyclic = "\x80\x02]q\x00h\x00"s + "a.";
  const yolo::PyRef c = yolo::unpickle_bytes(cyclic, "cyclic.pkl", none);
  EXPECT_EQ(c->items.at(0).get(), c.get());
  c->items.clear();  // break the cycle the file made
  // A model whose every module holds the next one twice: 2^40 paths, refused after a bounded walk.
  auto key = [](const std::string& k) { return "X" + u32(static_cast<uint32_t>(k.size())) + k; };
  const std::string obj = "cmodels.yolo\nDetectionModel\n)\x81";
  std::string dag = "\x80\x02"s + obj + "}(" + key("_modules") + "}ubq"s + '\0' + "0";
  for (int i = 0; i < 40; ++i) {
    const std::string get = "h"s + static_cast<char>(i);
    dag += obj + "}(" + key("_modules") + "}(" + key("a") + get + key("b") + get + "uubq" +
           static_cast<char>(i + 1) + "0";
  }
  dag += "}(" + key("model") + "h" + static_cast<char>(40) + "u.";
  const yolo::PyRef root = yolo::unpickle_bytes(dag, "dag.pkl", yolo::is_yolov5_checkpoint_global);
  EXPECT_THROW(yolo::yolov5_checkpoint(*root, "dag.pkl"), std::runtime_error);
  // Opcodes that name code by text, and protocol-0 ints, are refused.
  for (const std::string& bad : {"\x80\x02(X\x01\x00\x00\x00xios\nsystem\n."s, "\x80\x02I1\n."s}) {
    EXPECT_THROW(yolo::unpickle_bytes(bad, "bad.pkl", none), std::runtime_error);
  }
}

// Python's own pickler (no torch needed): the fuzzer's seeds, shaped like a YOLOv5 checkpoint,
// read as one, with names from a dict and from a list.
TEST_F(Yolov5CheckpointTest, ReadsPythonPicklersOutput) {
  if (std::system("/usr/bin/python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const std::string cmd = "/usr/bin/python3 '" + yolo::project_root() +
                          "/tests/reliability/fuzz/pickle_seeds.py' '" + dir_.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (const char* seed : {"seed0.pkl", "seed1.pkl"}) {
    SCOPED_TRACE(seed);
    std::ifstream in(dir_ / seed, std::ios::binary);
    const std::string pkl((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const yolo::PyRef root = yolo::unpickle_bytes(pkl, seed, yolo::is_yolov5_checkpoint_global);
    const auto ck = yolo::yolov5_checkpoint(*root, seed);
    ASSERT_TRUE(ck.has_value());
    EXPECT_EQ(ck->model_class, "models.yolo.DetectionModel");
    EXPECT_EQ(ck->names, (std::vector<std::string>{"a", "b"}));
    ASSERT_EQ(ck->model.count("model.weight"), 1u);
    EXPECT_EQ(ck->model.at("model.weight").sizes(), (at::IntArrayRef{2, 2}));
    EXPECT_EQ(ck->model.at("model.weight").scalar_type(), at::kFloat);
    const yolo::PyValue* bytes = root->find("optimizer")->find("b");
    ASSERT_NE(bytes, nullptr);
    EXPECT_EQ(bytes->text, std::string("\x00\xff", 2));  // protocol 2's _codecs.encode
  }
}

#include "models/unpickler.h"

#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <unordered_map>

#include "utils/core/io/torch_archive.h"

namespace yolo {
namespace {

// A refusal or malformed pickle, with its message complete but for the file name.
struct PickleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr const char* kNoCode = "; loading never executes code from a file";

using Type = PyValue::Type;

PyRef make(Type t) { return std::make_shared<PyValue>(t); }

// Storage classes torch.save names in persistent ids, and their element types.
const std::map<std::string, at::ScalarType>& storage_types() {
  static const std::map<std::string, at::ScalarType> m = {
      {"torch.FloatStorage", at::kFloat},   {"torch.HalfStorage", at::kHalf},
      {"torch.DoubleStorage", at::kDouble}, {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},     {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},   {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},     {"torch.BoolStorage", at::kBool}};
  return m;
}

// Globals whose meaning the reader itself gives (none of them is called).
bool is_builtin_global(const std::string& q) {
  static const char* const kNames[] = {"torch._utils._rebuild_tensor_v2",
                                       "torch._utils._rebuild_parameter",
                                       "torch._utils._rebuild_parameter_with_state",
                                       "torch._tensor._rebuild_from_type_v2",
                                       "torch.Tensor",
                                       "torch.nn.parameter.Parameter",
                                       "collections.OrderedDict",
                                       "builtins.set",
                                       "builtins.frozenset",
                                       "_codecs.encode",
                                       "torch.jit._pickle.restore_type_tag",
                                       "torch.jit._pickle.build_intlist",
                                       "torch.jit._pickle.build_doublelist",
                                       "torch.jit._pickle.build_boollist",
                                       "torch.jit._pickle.build_tensorlist"};
  for (const char* n : kNames) {
    if (q == n) return true;
  }
  return storage_types().count(q) > 0;
}

// Names go into messages: keep them printable and short.
std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 120 ? out + "..." : out;
}

class Machine {
 public:
  Machine(const std::string& data, const GlobalPolicy& allow,
          std::function<PyRef(const PyValue&)> persistent)
      : data_(data), allow_(allow), persistent_(std::move(persistent)) {}

  PyRef run() {
    while (true) {
      const size_t at = pos_;
      const uint8_t op = byte();
      if (op == '.') break;
      if (!scalar_op(op) && !container_op(op) && !memo_op(op) && !object_op(op)) {
        unknown_op(op, at);
      }
    }
    if (stack_.size() != 1 || !marks_.empty()) fail("the pickle ends with a malformed stack");
    return stack_.back();
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw PickleError("malformed pickle data at byte " + std::to_string(pos_) + ": " + why);
  }

  // --- reading the byte stream ------------------------------------------------------------
  void need(uint64_t n) const {
    if (n > data_.size() - pos_) fail("it ends early (truncated or damaged)");
  }
  uint8_t byte() {
    need(1);
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint64_t uint_le(int n) {
    need(n);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  std::string bytes(uint64_t n) {
    need(n);
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos || end - pos_ > 256) fail("a GLOBAL name is not terminated");
    std::string s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  // --- the stack ----------------------------------------------------------------------------
  void push(PyRef v) { stack_.push_back(std::move(v)); }
  PyRef pop() {
    if (stack_.size() <= floor()) fail("the stack underflows");
    PyRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  PyRef& top() {
    if (stack_.size() <= floor()) fail("the stack underflows");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<PyRef> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> items(std::make_move_iterator(stack_.begin() + m),
                             std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }
  PyRef scalar(Type t) { return make(t); }
  PyRef integer(int64_t v) {
    PyRef r = make(Type::kInt);
    r->integer = v;
    return r;
  }
  PyRef str(Type t, std::string s) {
    PyRef r = make(t);
    r->text = std::move(s);
    return r;
  }
  PyRef long_int(uint64_t n) {
    if (n > 8) fail("an integer wider than 64 bits");
    if (n == 0) return integer(0);
    uint64_t v = uint_le(static_cast<int>(n));
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);  // sign-extend
    return integer(static_cast<int64_t>(v));
  }

  bool scalar_op(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const int proto = byte();
        if (proto > 5) fail("pickle protocol " + std::to_string(proto) + " (at most 5 is known)");
        return true;
      }
      case 0x95:
        uint_le(8);
        return true;  // FRAME: a length hint only
      case 'N':
        push(scalar(Type::kNone));
        return true;
      case 0x88:
      case 0x89: {
        PyRef b = scalar(Type::kBool);
        b->boolean = op == 0x88;
        push(b);
        return true;
      }
      case 'J':
        push(integer(static_cast<int32_t>(uint_le(4))));
        return true;
      case 'K':
        push(integer(byte()));
        return true;
      case 'M':
        push(integer(static_cast<int64_t>(uint_le(2))));
        return true;
      case 0x8a:
        push(long_int(byte()));
        return true;
      case 0x8b:
        push(long_int(uint_le(4)));
        return true;
      case 'G': {
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();  // big-endian
        PyRef f = scalar(Type::kFloat);
        std::memcpy(&f->real, &bits, sizeof(double));
        push(f);
        return true;
      }
      case 'X':
      case 'T':
        push(str(Type::kStr, bytes(uint_le(4))));
        return true;
      case 0x8c:
      case 'U':
        push(str(Type::kStr, bytes(byte())));
        return true;
      case 0x8d:
        push(str(Type::kStr, bytes(uint_le(8))));
        return true;
      case 'B':
        push(str(Type::kBytes, bytes(uint_le(4))));
        return true;
      case 'C':
        push(str(Type::kBytes, bytes(byte())));
        return true;
      case 0x8e:
      case 0x96:
        push(str(Type::kBytes, bytes(uint_le(8))));
        return true;
      default:
        return false;
    }
  }

  void add_items(PyValue& to, std::vector<PyRef> items) {
    if (!to.is(Type::kList) && !to.is(Type::kSet)) {
      fail("APPEND/ADDITEMS to a " + to.type_name() + ", not a list or set");
    }
    for (auto& i : items) to.items.push_back(std::move(i));
  }
  void set_items(PyValue& to, std::vector<PyRef> kv) {
    if (!to.is(Type::kDict)) fail("SETITEM on a " + to.type_name() + ", not a dict");
    if (kv.size() % 2) fail("SETITEMS with an odd number of items");
    for (size_t i = 0; i < kv.size(); i += 2) {
      to.entries.emplace_back(std::move(kv[i]), std::move(kv[i + 1]));
    }
  }
  PyRef tuple(std::vector<PyRef> items) {
    PyRef t = make(Type::kTuple);
    t->items = std::move(items);
    return t;
  }

  bool container_op(uint8_t op) {
    switch (op) {
      case '(':
        marks_.push_back(stack_.size());
        return true;
      case '0':
        pop();
        return true;
      case '1':
        pop_mark();
        return true;
      case '2':
        push(top());
        return true;
      case ']':
        push(make(Type::kList));
        return true;
      case '}':
        push(make(Type::kDict));
        return true;
      case 0x8f:
        push(make(Type::kSet));
        return true;
      case ')':
        push(make(Type::kTuple));
        return true;
      case 'a': {
        PyRef v = pop();
        add_items(*top(), {std::move(v)});
        return true;
      }
      case 'e':
      case 0x90: {
        std::vector<PyRef> items = pop_mark();
        add_items(*top(), std::move(items));
        return true;
      }
      case 's': {
        PyRef v = pop();
        PyRef k = pop();
        set_items(*top(), {std::move(k), std::move(v)});
        return true;
      }
      case 'u': {
        std::vector<PyRef> kv = pop_mark();
        set_items(*top(), std::move(kv));
        return true;
      }
      case 't':
        push(tuple(pop_mark()));
        return true;
      case 0x91: {
        PyRef s = make(Type::kSet);
        s->items = pop_mark();
        push(s);
        return true;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<PyRef> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        push(tuple(std::move(items)));
        return true;
      }
      default:
        return false;
    }
  }

  bool memo_op(uint8_t op) {
    switch (op) {
      case 'q':
        memo_[byte()] = top();
        return true;
      case 'r':
        memo_[uint_le(4)] = top();
        return true;
      case 0x94:
        memo_[memo_.size()] = top();
        return true;
      case 'h':
      case 'j': {
        const uint64_t k = op == 'h' ? byte() : uint_le(4);
        const auto it = memo_.find(k);
        if (it == memo_.end()) fail("BINGET of memo entry " + std::to_string(k) + " never PUT");
        push(it->second);
        return true;
      }
      default:
        return false;
    }
  }

  // --- globals, calls, objects --------------------------------------------------------------
  PyRef global(const std::string& module, const std::string& name) {
    std::string q = module + "." + name;
    // Python 3 writes protocol-2 builtins under their Python 2 module name.
    if (module == "__builtin__") q = "builtins." + name;
    if (!is_builtin_global(q) && !allow_(q)) {
      throw PickleError(
          "refused: the pickle names " + printable(q) +
          ", which is not a class this reader rebuilds (YOLOv5's and Ultralytics' models, torch.nn "
          "modules, tensors, storages, OrderedDict); it may be code" +
          std::string(kNoCode));
    }
    return str(Type::kGlobal, q);
  }

  const PyValue& arg(const std::vector<PyRef>& a, size_t i) const {
    if (i >= a.size()) fail("a call with too few arguments");
    return *a[i];
  }
  std::vector<PyRef> args_of(const PyValue& t, const std::string& what, size_t min_n) {
    if (!t.is(Type::kTuple) || t.items.size() < min_n) {
      fail(what + " expects a tuple of at least " + std::to_string(min_n) + " arguments");
    }
    return t.items;
  }
  std::vector<int64_t> int_tuple(const PyValue& v, const std::string& what) {
    if (!v.is(Type::kTuple) && !v.is(Type::kList)) fail(what + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto& e : v.items) {
      if (!e->is(Type::kInt) || e->integer < 0) fail(what + " holds a non-integer or negative");
      out.push_back(e->integer);
    }
    return out;
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...): a view of the storage,
  // its extent checked first.
  PyRef rebuild_tensor(const std::vector<PyRef>& a) {
    const PyValue& st = arg(a, 0);
    if (!st.is(Type::kStorage)) fail("a tensor is rebuilt from a " + st.type_name());
    if (!arg(a, 1).is(Type::kInt) || arg(a, 1).integer < 0) fail("a tensor's offset is invalid");
    const int64_t offset = arg(a, 1).integer;
    const std::vector<int64_t> size = int_tuple(arg(a, 2), "a tensor's size");
    const std::vector<int64_t> stride = int_tuple(arg(a, 3), "a tensor's stride");
    if (size.size() != stride.size() || size.size() > 16) fail("a tensor's size and stride differ");
    const int64_t numel = st.tensor.numel();
    // The last element the view reaches, in 128-bit arithmetic (no overflow on hostile sizes).
    __int128 last = offset;
    bool empty = false;
    for (size_t i = 0; i < size.size(); ++i) {
      empty = empty || size[i] == 0;
      if (size[i] > 0) last += static_cast<__int128>(size[i] - 1) * stride[i];
    }
    if (!empty && last >= numel) {
      fail("a tensor of size " + std::to_string(size.size()) + "-d reaches element " +
           std::to_string(static_cast<int64_t>(std::min<__int128>(last, INT64_MAX))) +
           " of a storage of " + std::to_string(numel) + " (wrong tensor sizes)");
    }
    PyRef t = make(Type::kTensor);
    t->tensor =
        empty ? at::empty(size, st.tensor.options()) : st.tensor.as_strided(size, stride, offset);
    return t;
  }

  PyRef call(const std::string& fn, const std::vector<PyRef>& a) {
    if (fn == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(a);
    if (fn == "torch._utils._rebuild_parameter" ||
        fn == "torch._utils._rebuild_parameter_with_state") {
      if (!arg(a, 0).is(Type::kTensor))
        fail("a parameter is rebuilt from a " + arg(a, 0).type_name());
      return a[0];
    }
    if (fn == "torch._tensor._rebuild_from_type_v2") {  // (func, type, args, state)
      if (!arg(a, 0).is(Type::kGlobal) || !arg(a, 2).is(Type::kTuple)) {
        fail("_rebuild_from_type_v2 with malformed arguments");
      }
      const std::string& inner = arg(a, 0).text;
      if (inner != "torch._utils._rebuild_tensor_v2" &&
          inner != "torch._utils._rebuild_parameter") {
        fail("_rebuild_from_type_v2 of " + printable(inner));
      }
      return call(inner, args_of(arg(a, 2), inner, 3));
    }
    if (fn == "collections.OrderedDict") {
      if (!a.empty()) fail("OrderedDict called with arguments");
      return make(Type::kDict);
    }
    if (fn == "builtins.set" || fn == "builtins.frozenset") {
      PyRef s = make(Type::kSet);
      if (!a.empty()) {
        if (!arg(a, 0).is(Type::kList) && !arg(a, 0).is(Type::kTuple)) fail("set of a non-list");
        s->items = arg(a, 0).items;
      }
      return s;
    }
    if (fn == "_codecs.encode") return encode_latin1(a);
    // LibTorch's pickler tags typed containers (value, type string) and wraps typed lists; both
    // stand for the value itself.
    if (fn == "torch.jit._pickle.restore_type_tag" || starts_with(fn, "torch.jit._pickle.build_")) {
      if (a.empty()) fail(fn + " without arguments");
      return a[0];
    }
    if (storage_types().count(fn) || fn == "torch.Tensor" || fn == "torch.nn.parameter.Parameter") {
      fail(fn + " called directly, as torch.save never does");
    }
    PyRef obj = str(Type::kObject, fn);  // an allowed record class or function: recorded
    obj->items = a;
    return obj;
  }

  // Protocol 2 writes bytes as _codecs.encode(text, 'latin1'): each code point below 256 is one
  // byte (the text arrives UTF-8 encoded).
  PyRef encode_latin1(const std::vector<PyRef>& a) {
    if (a.size() != 2 || !arg(a, 0).is(Type::kStr) || !arg(a, 1).is(Type::kStr) ||
        (arg(a, 1).text != "latin1" && arg(a, 1).text != "latin-1")) {
      fail("_codecs.encode other than (text, 'latin1')");
    }
    const std::string& u = arg(a, 0).text;
    std::string out;
    for (size_t i = 0; i < u.size(); ++i) {
      const auto c = static_cast<uint8_t>(u[i]);
      if (c < 0x80) {
        out += static_cast<char>(c);
      } else if ((c & 0xE0) == 0xC0 && i + 1 < u.size() && c <= 0xC3) {
        out += static_cast<char>(((c & 0x03) << 6) | (static_cast<uint8_t>(u[++i]) & 0x3F));
      } else {
        fail("_codecs.encode of a code point above 255");
      }
    }
    return str(Type::kBytes, out);
  }

  static bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

  void build(PyValue& obj, PyRef state) {
    if (state->is(Type::kNone)) return;
    if (!obj.is(Type::kObject)) fail("BUILD on a " + obj.type_name());
    obj.state = std::move(state);
  }

  bool object_op(uint8_t op) {
    switch (op) {
      case 'c': {
        const std::string module = line();
        push(global(module, line()));
        return true;
      }
      case 0x93: {
        PyRef name = pop();
        PyRef module = pop();
        if (!module->is(Type::kStr) || !name->is(Type::kStr)) fail("STACK_GLOBAL of non-strings");
        push(global(module->text, name->text));
        return true;
      }
      case 'R': {
        PyRef args = pop();
        PyRef fn = pop();
        if (!fn->is(Type::kGlobal)) fail("REDUCE calls a " + fn->type_name() + ", not a global");
        push(call(fn->text, args_of(*args, fn->text, 0)));
        return true;
      }
      case 0x81:
      case 0x92: {              // NEWOBJ, NEWOBJ_EX: cls.__new__(cls, *args)
        if (op == 0x92) pop();  // keyword arguments: a record keeps none
        PyRef args = pop();
        PyRef cls = pop();
        if (!cls->is(Type::kGlobal)) fail("NEWOBJ of a " + cls->type_name());
        if (cls->text == "collections.OrderedDict") {
          push(make(Type::kDict));
        } else if (is_builtin_global(cls->text)) {
          fail("NEWOBJ of " + cls->text);
        } else {
          PyRef obj = str(Type::kObject, cls->text);
          obj->items = args_of(*args, cls->text, 0);
          push(obj);
        }
        return true;
      }
      case 'b': {
        PyRef state = pop();
        build(*top(), std::move(state));
        return true;
      }
      case 'Q': {
        PyRef pid = pop();
        push(persistent_(*pid));
        return true;
      }
      default:
        return false;
    }
  }

  [[noreturn]] void unknown_op(uint8_t op, size_t at) {
    static const std::string kCode = "ioP";  // INST, OBJ (globals by text), PERSID
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", op);
    pos_ = at;
    if (kCode.find(static_cast<char>(op)) != std::string::npos || (op >= 0x82 && op <= 0x84)) {
      throw PickleError(std::string("refused: the pickle uses opcode ") + hex +
                        " (INST/OBJ/PERSID/EXT), which names code in a way torch.save never "
                        "writes" +
                        kNoCode);
    }
    fail(std::string("opcode ") + hex + ", which torch.save's pickle protocol 2 never writes");
  }

  const std::string& data_;
  const GlobalPolicy& allow_;
  std::function<PyRef(const PyValue&)> persistent_;
  size_t pos_ = 0;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyRef> memo_;
};

// ('storage', storage_type, key, location, numel): the archive's data/<key> as a 1-D tensor,
// shared by every tensor that names the same key.
class StorageLoader {
 public:
  explicit StorageLoader(caffe2::serialize::PyTorchStreamReader* reader) : reader_(reader) {}

  PyRef operator()(const PyValue& pid) {
    if (!pid.is(Type::kTuple) || pid.items.size() != 5 || !pid.items[0]->is(Type::kStr) ||
        pid.items[0]->text != "storage" || !pid.items[1]->is(Type::kGlobal) ||
        !pid.items[2]->is(Type::kStr) || !pid.items[4]->is(Type::kInt)) {
      throw PickleError("malformed pickle data: a persistent id that is not a storage");
    }
    const auto type = storage_types().find(pid.items[1]->text);
    if (type == storage_types().end()) {
      throw PickleError("malformed pickle data: storage type " + pid.items[1]->text);
    }
    const std::string& key = pid.items[2]->text;
    const auto known = loaded_.find(key);
    if (known != loaded_.end()) return known->second;
    const int64_t numel = pid.items[4]->integer;
    const auto elem = static_cast<int64_t>(c10::elementSize(type->second));
    if (!reader_) return zeros(key, type->second, numel);
    const std::string record = "data/" + key;
    if (key.find('/') != std::string::npos || !reader_->hasRecord(record)) {
      throw PickleError("malformed pickle data: storage '" + printable(key) +
                        "' is not in the archive");
    }
    const auto [ptr, have] = reader_->getRecord(record);
    if (numel < 0 || numel > static_cast<int64_t>(have) / elem) {
      throw PickleError("storage '" + printable(key) + "' claims " + std::to_string(numel) +
                        " elements but its record holds " + std::to_string(have) +
                        " bytes (wrong tensor sizes)");
    }
    at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(type->second));
    if (numel > 0) std::memcpy(t.data_ptr(), ptr.get(), static_cast<size_t>(numel * elem));
    PyRef s = make(Type::kStorage);
    s->tensor = t;
    loaded_[key] = s;
    return s;
  }

 private:
  // Without an archive: zeros of the claimed size, at most 2^24 elements in all.
  PyRef zeros(const std::string& key, at::ScalarType type, int64_t numel) {
    if (numel < 0 || numel > (int64_t(1) << 24) - zeros_) {
      throw PickleError("storage '" + printable(key) + "' claims " + std::to_string(numel) +
                        " elements (wrong tensor sizes)");
    }
    zeros_ += numel;
    PyRef s = make(Type::kStorage);
    s->tensor = at::zeros({numel}, at::TensorOptions().dtype(type));
    loaded_[key] = s;
    return s;
  }

  caffe2::serialize::PyTorchStreamReader* reader_;
  std::map<std::string, PyRef> loaded_;
  int64_t zeros_ = 0;
};

}  // namespace

PyValue::~PyValue() {
  std::vector<PyRef> pending;
  auto take = [&pending](PyValue& v) {
    for (auto& i : v.items) pending.push_back(std::move(i));
    for (auto& [k, e] : v.entries) {
      pending.push_back(std::move(k));
      pending.push_back(std::move(e));
    }
    if (v.state) pending.push_back(std::move(v.state));
    v.items.clear();
    v.entries.clear();
  };
  take(*this);
  while (!pending.empty()) {
    PyRef p = std::move(pending.back());
    pending.pop_back();
    if (p && p.use_count() == 1) take(*p);  // freed below with no children left to recurse into
  }
}

const PyValue* PyValue::find(const std::string& key) const {
  const PyValue* d = this;
  if (is(Type::kObject)) d = state.get();
  if (!d || !d->is(Type::kDict)) return nullptr;
  for (const auto& [k, v] : d->entries) {
    if (k->is(Type::kStr) && k->text == key) return v.get();
  }
  return nullptr;
}

std::string PyValue::type_name() const {
  static const char* const kNames[] = {"None",   "bool",    "int",    "float", "str",
                                       "bytes",  "list",    "tuple",  "set",   "dict",
                                       "tensor", "storage", "global", "object"};
  if (is(Type::kObject) || is(Type::kGlobal)) return text;
  return kNames[static_cast<int>(type)];
}

PyRef unpickle_bytes(const std::string& pickle, const std::string& source,
                     const GlobalPolicy& allow) {
  try {
    StorageLoader none(nullptr);
    return Machine(pickle, allow, std::ref(none)).run();
  } catch (const PickleError& e) {
    throw std::runtime_error(source + ": " + e.what());
  }
}

PyRef unpickle_torch_archive(const std::string& path, const std::string& kind,
                             const GlobalPolicy& allow, const std::string& hint) {
  const std::vector<char> bytes = read_torch_zip_bytes(path, kind, hint);
  try {
    const auto reader = open_torch_zip(bytes);
    if (reader->hasRecord("byteorder")) {
      const auto [ptr, n] = reader->getRecord("byteorder");
      if (std::string(static_cast<const char*>(ptr.get()), n) != "little") {
        throw PickleError("written on a big-endian machine, which this reader does not convert");
      }
    }
    const auto [ptr, n] = reader->getRecord("data.pkl");
    const std::string pickle(static_cast<const char*>(ptr.get()), n);
    StorageLoader storages(reader.get());
    return Machine(pickle, allow, std::ref(storages)).run();
  } catch (const PickleError& e) {
    throw std::runtime_error(path + ": " + e.what());
  } catch (const std::exception& e) {
    throw_archive_error(path, kind, hint, e);
  }
}

}  // namespace yolo

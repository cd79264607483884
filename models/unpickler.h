#pragma once
// A restricted unpickler for torch.save zip archives that hold pickled Python objects (YOLOv5's
// checkpoints pickle the whole nn.Module tree). It never calls anything the file names: objects of
// allowed classes become inert records (class name, constructor arguments, attribute state), and
// only a fixed set of PyTorch rebuild functions has meaning (tensors, parameters, storages,
// OrderedDict, set, bytes). A GLOBAL outside that set and the caller's allow-list ends the read
// with an error naming the file and the class.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace yolo {

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

struct PyValue {
  enum class Type {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kList,
    kTuple,
    kSet,
    kDict,
    kTensor,
    kStorage,
    kGlobal,  // a class or function named by the pickle (its qualified name in `text`)
    kObject,  // a record: class name in `text`, constructor arguments in `items`, BUILD `state`
  };
  Type type = Type::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;                              // kStr, kBytes, kGlobal, kObject
  std::vector<PyRef> items;                      // kList, kTuple, kSet; kObject: arguments
  std::vector<std::pair<PyRef, PyRef>> entries;  // kDict, in insertion order
  PyRef state;                                   // kObject
  at::Tensor tensor;                             // kTensor, kStorage (1-D)

  PyValue() = default;
  explicit PyValue(Type t) : type(t) {}
  PyValue(const PyValue&) = delete;
  PyValue& operator=(const PyValue&) = delete;
  // Tears nested containers down iteratively: a deep pickle must not overflow the stack here.
  ~PyValue();

  bool is(Type t) const { return type == t; }
  // A dict's entry under the string `key`, or an object's attribute (its state dict's entry);
  // nullptr when absent.
  const PyValue* find(const std::string& key) const;
  // "dict", "str", "int", ..., or an object's class name, for messages.
  std::string type_name() const;
};

// Which classes and functions a pickle may name beyond the built-in rebuild set. A record global
// called by REDUCE or NEWOBJ yields a kObject holding its arguments; nothing runs.
using GlobalPolicy = std::function<bool(const std::string& qualified_name)>;

// Reads the zip at `path` (torch.save's format) and unpickles its data.pkl under `allow`.
// Storages are read from the archive and become CPU tensors; tensors and parameters are views of
// them whose extents are checked against the storage. Errors (std::runtime_error) name `path` and
// say why: not a zip, damaged or truncated, a newer format, a refused global (with its name), an
// opcode torch.save never writes, or malformed pickle data. `kind` and `hint` are as for
// read_pickle_archive.
PyRef unpickle_torch_archive(const std::string& path, const std::string& kind,
                             const GlobalPolicy& allow, const std::string& hint = "");

// The same on the bytes of data.pkl alone, with no archive: each storage is zeros of the size it
// claims (at most 2^24 elements). For tests and the fuzzer.
PyRef unpickle_bytes(const std::string& pickle, const std::string& source,
                     const GlobalPolicy& allow);

}  // namespace yolo

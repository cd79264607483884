"""Usage: pickle_seeds.py DIR: small protocol-2 pickles shaped like a YOLOv5 checkpoint (a model
object of allowed classes with OrderedDicts, a set, a tensor on a persistent-id storage, names
as a dict and a list, numpy-style bytes) as seeds for fuzz_pickle. Needs only Python."""
import collections
import io
import os
import pickle
import sys
import types


def fake(module, name):
    """A class pickled as module.name, without that module existing."""
    parts = module.split(".")
    for i in range(1, len(parts) + 1):  # the parent packages too, for pickle's import check
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    mod = sys.modules[module]
    cls = type(name, (), {"__module__": module})
    setattr(mod, name, cls)
    return cls


Conv, Det = fake("yolov5.models.common", "Conv"), fake("models.yolo", "DetectionModel")
Storage = fake("torch", "HalfStorage")
rebuild = fake("torch._utils", "_rebuild_tensor_v2")


class Tensor:
    def __reduce__(self):
        return (rebuild, (StorageRef(), 0, (2, 2), (2, 1), False, collections.OrderedDict()))


class StorageRef:
    pass


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", Storage, "0", "cpu", 4) if isinstance(obj, StorageRef) else None


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    conv = Conv()
    conv.__dict__ = {"_parameters": collections.OrderedDict(weight=Tensor()),
                     "_buffers": collections.OrderedDict(), "_non_persistent_buffers_set": set(),
                     "_modules": collections.OrderedDict(), "training": False}
    for i, names in enumerate(({0: "a", 1: "b"}, ["a", "b"])):
        model = Det()
        model.__dict__ = {"_modules": collections.OrderedDict(model=conv), "names": names,
                          "yaml": {"nc": 2, "depth_multiple": 0.33, "anchors": [[10, 13]],
                                   "backbone": [[-1, 1, "Conv", [16, 3]]], "head": []},
                          "nc": 2, "stride": Tensor()}
        ckpt = {"epoch": -1, "best_fitness": None, "model": model, "ema": None,
                "optimizer": {"lr": 0.01, "b": b"\x00\xff"}, "date": "2026"}
        buf = io.BytesIO()
        Pickler(buf, protocol=2).dump(ckpt)
        with open(os.path.join(out, f"seed{i}.pkl"), "wb") as f:
            f.write(buf.getvalue())


if __name__ == "__main__":
    main()

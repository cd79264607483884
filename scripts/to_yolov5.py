#!/usr/bin/env python3
"""Turn a checkpoint written by this trainer (best.pt, last.pt) into a YOLOv5 v7.0 checkpoint:
the pickled DetectionModel (FP16, class names, stride, anchors) that YOLOv5's detect.py, val.py,
export.py and torch.hub load, so ONNX, TensorRT, CoreML, TFLite and OpenVINO are one YOLOv5
export away.

    python scripts/to_yolov5.py runs/train/exp/weights/best.pt yolov5_best.pt
    python -m yolov5.export --weights yolov5_best.pt --include onnx --imgsz 640

Runs where YOLOv5 is importable: a YOLOv5 v7.0 checkout named by --yolov5, or the `yolov5` 7.0.x
package from PyPI. --layout says whose module names the pickle uses: `repo` (default) as
Ultralytics' released weights (models.yolo, models.common) for a clone of the YOLOv5 repository;
`pip` (yolov5.models...) for the PyPI package, whose export.py only recognises its own classes.
On PyTorch >= 2.6, YOLOv5 7.0's loaders need TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for any pickled
model, Ultralytics' own weights included.
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import our_checkpoint  # noqa: E402


def fail(msg):
    sys.exit(f"to_yolov5: {msg}")


def import_yolov5(checkout):
    """YOLOv5's DetectionModel and the name of the package its modules live in."""
    if checkout:
        if not os.path.isfile(os.path.join(checkout, "models", "yolo.py")):
            fail(f"--yolov5 {checkout}: not a YOLOv5 checkout (no models/yolo.py)")
        sys.path.insert(0, os.path.abspath(checkout))
        from models.yolo import DetectionModel  # noqa: E402
        return DetectionModel, ""
    try:
        from yolov5.models.yolo import DetectionModel
    except ImportError as e:
        fail(f"YOLOv5 is not importable ({e}); pip install yolov5==7.0.14, or give --yolov5 with a "
             "YOLOv5 v7.0 checkout")
    return DetectionModel, "yolov5."


def read_yaml(path, what):
    import yaml
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except OSError as e:
        fail(f"{path}: cannot read the {what} ({e.strerror}); give it with --{what}")


def find_cfg(opt, override, yolov5_dir):
    """The model YAML: --cfg, else the run's cfg, else YOLOv5's own file of that name."""
    cands = [override] if override else []
    cfg = opt.get("cfg") or ""
    if cfg and not override:
        cands += [cfg, os.path.join(yolov5_dir, "models", os.path.basename(cfg))]
    for c in cands:
        if c and os.path.isfile(c):
            return c
    fail(f"model YAML not found (tried {', '.join(cands) or 'nothing'}); give it with --cfg")


def class_names(opt, override, nc):
    if override:
        d = read_yaml(override, "data")
    elif opt.get("data") and os.path.isfile(opt["data"]):
        d = read_yaml(opt["data"], "data")
    else:
        print(f"to_yolov5: the run's data YAML {opt.get('data')!r} is not here; naming the classes "
              "class0.. (give --data for the real names)")
        return {i: f"class{i}" for i in range(nc)}
    names = d.get("names")
    names = [names[k] for k in sorted(names)] if isinstance(names, dict) else list(names or [])
    if d.get("single_cls") or opt.get("single_cls"):
        names = ["item"]
    if len(names) != nc:
        fail(f"the data YAML names {len(names)} classes, the weights detect {nc}")
    return dict(enumerate(names))


def rename_for_repo(model, package):
    """Point the pickled classes at models.* / utils.* as in a YOLOv5 clone (and the released
    weights); returns a function that undoes it."""
    undo = []
    for name in [n for n in sys.modules if n.startswith(package + "models") or
                 n.startswith(package + "utils")]:
        alias = name[len(package):]
        if alias not in sys.modules:
            sys.modules[alias] = sys.modules[name]
            undo.append(lambda a=alias: sys.modules.pop(a, None))
    for cls in {type(m) for m in model.modules()}:
        if cls.__module__.startswith(package + "models."):
            old = cls.__module__
            cls.__module__ = old[len(package):]
            undo.append(lambda c=cls, o=old: setattr(c, "__module__", o))
    return lambda: [u() for u in reversed(undo)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("weights", help="checkpoint written by train (best.pt, last.pt, epochN.pt)")
    ap.add_argument("output", help="where to write the YOLOv5 checkpoint")
    ap.add_argument("--cfg", help="model YAML (default: the run's, from the checkpoint)")
    ap.add_argument("--data", help="dataset YAML for the class names (default: the run's)")
    ap.add_argument("--yolov5", help="a YOLOv5 v7.0 checkout (default: the yolov5 package)")
    ap.add_argument("--layout", choices=["repo", "pip"], default="repo",
                    help="module names in the pickle: repo (a YOLOv5 clone, as released weights) "
                         "or pip (the yolov5 package)")
    a = ap.parse_args()

    import yaml
    DetectionModel, package = import_yolov5(a.yolov5)
    yolov5_dir = os.path.dirname(os.path.dirname(sys.modules[DetectionModel.__module__].__file__))
    ck = our_checkpoint.read(a.weights, fail)
    sd = ck["model"]
    opt = yaml.safe_load(ck.get("opt") or "") or {}
    hyp = yaml.safe_load(ck.get("hyp") or "") or {}

    # The Detect layer is the last one: anchors (nl, na, 2) and one 1x1 conv per level with
    # na * (5 + nc) outputs.
    last = our_checkpoint.last_layer(sd)
    anchors, head = sd.get(f"model.{last}.anchors"), sd.get(f"model.{last}.m.0.weight")
    if anchors is None or head is None:
        fail(f"{a.weights}: no Detect layer (model.{last}.anchors, model.{last}.m.0.weight)")
    nc = head.shape[0] // anchors.shape[1] - 5
    if ck.get("model_yaml") and not a.cfg:  # the architecture the checkpoint carries
        cfg = yaml.safe_load(ck["model_yaml"])
    else:
        cfg = read_yaml(find_cfg(opt, a.cfg, yolov5_dir), "cfg")
    model = DetectionModel(cfg, ch=3, nc=nc)
    our_checkpoint.load_weights(model, sd, fail, "; give the run's model YAML with --cfg")
    saved = ck.get("names")
    if saved and not a.data:  # the classes the checkpoint carries
        if len(saved) != nc:
            fail(f"{a.weights}: 'names' lists {len(saved)} classes, the weights detect {nc}")
        model.names = dict(enumerate(saved))
    else:
        model.names = class_names(opt, a.data, nc)
    model.nc = nc
    model.hyp = hyp
    model.eval()
    for p in model.parameters():
        p.requires_grad = False
    out = {"epoch": -1, "best_fitness": None, "model": model.half(), "ema": None, "updates": None,
           "optimizer": None, "opt": opt, "git": None,
           "date": ck.get("date") or datetime.datetime.now().isoformat()}
    undo = rename_for_repo(model, package) if a.layout == "repo" and package else (lambda: None)
    try:
        our_checkpoint.save(out, a.output)
    finally:
        undo()
    print(f"{a.output}: YOLOv5 v7.0 checkpoint ({a.layout} layout), {nc} classes, stride "
          f"{model.stride.int().tolist()}, {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()

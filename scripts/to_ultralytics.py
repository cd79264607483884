#!/usr/bin/env python3
"""Turn a checkpoint of a YOLOv8 or YOLO11 model written by this trainer (best.pt, last.pt) into an
Ultralytics checkpoint: the pickled float16 DetectionModel with its class names, as Ultralytics'
trainer leaves best.pt, which `YOLO("best_ultralytics.pt")` predicts, validates, exports and
fine-tunes with.

    python scripts/to_ultralytics.py runs/train/exp/weights/best.pt best_ultralytics.pt
    yolo predict model=best_ultralytics.pt source=images/

Runs where the `ultralytics` package (8.4.x) is importable. The model is rebuilt from the YAML the
checkpoint carries (with its scale) and the weights are loaded as a state_dict: every entry must
fit. YOLOv5 checkpoints go through scripts/to_yolov5.py instead.
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import our_checkpoint  # noqa: E402


def fail(msg):
    sys.exit(f"to_ultralytics: {msg}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("weights", help="checkpoint written by train (best.pt, last.pt, epochN.pt)")
    ap.add_argument("output", help="where to write the Ultralytics checkpoint")
    a = ap.parse_args()

    import yaml
    try:
        import ultralytics
        from ultralytics.nn.tasks import DetectionModel
    except ImportError as e:
        fail(f"Ultralytics is not importable ({e}); pip install ultralytics==8.4.190")
    ck = our_checkpoint.read(a.weights, fail)
    if not ck.get("model_yaml"):
        fail(f"{a.weights}: no model YAML in the checkpoint; train writes one")
    cfg = yaml.safe_load(ck["model_yaml"])
    if "scales" not in cfg:
        fail(f"{a.weights}: a YOLOv5 model (its YAML has no 'scales'); use scripts/to_yolov5.py")
    sd = ck["model"]
    last = our_checkpoint.last_layer(sd)
    cls_out = sd.get(f"model.{last}.cv3.0.2.weight")
    if cls_out is None:
        fail(f"{a.weights}: no anchor-free Detect layer (model.{last}.cv3.0.2.weight)")
    nc = cls_out.shape[0]
    names = list(ck.get("names") or [f"class{i}" for i in range(nc)])
    if len(names) != nc:
        fail(f"{a.weights}: 'names' lists {len(names)} classes, the weights detect {nc}")
    cfg["nc"] = nc
    model = DetectionModel(cfg, ch=3, nc=nc, verbose=False)
    our_checkpoint.load_weights(model, sd, fail)
    model.names = dict(enumerate(names))
    model.eval()
    for p in model.parameters():
        p.requires_grad = False
    opt = yaml.safe_load(ck.get("opt") or "") or {}
    imgsz = opt.get("imgsz", 640)
    out = {"date": ck.get("date") or datetime.datetime.now().isoformat(),
           "version": ultralytics.__version__, "epoch": -1, "best_fitness": None,
           "model": model.half(), "ema": None, "updates": None, "optimizer": None,
           "scaler": None, "train_args": {"task": "detect", "imgsz": imgsz},
           "train_metrics": {}, "train_results": {}}
    our_checkpoint.save(out, a.output)
    print(f"{a.output}: Ultralytics checkpoint, {nc} classes, stride "
          f"{model.stride.int().tolist()}, {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()

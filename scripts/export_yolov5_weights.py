#!/usr/bin/env python3
"""Turn a YOLOv5 checkpoint into the plain {name: tensor} dict that `train/val/detect --weights`
read (LibTorch 1.13's pickle_load cannot read the OrderedDict that state_dict() returns, nor the
pickled model classes inside a YOLOv5 .pt).

    python3 scripts/export_yolov5_weights.py yolov5s.pt yolov5s_sd.pt --yolov5 path/to/yolov5

--yolov5 names a YOLOv5 checkout: unpickling a YOLOv5 .pt needs its `models` package.
The other way round, weights written by this trainer load in YOLOv5 with
    model.load_state_dict(torch.load('last_sd.pt'), strict=False)
"""
import argparse
import sys

import torch


def to_state_dict(obj):
    if isinstance(obj, dict) and ("model" in obj or "ema" in obj):
        obj = obj.get("ema") or obj["model"]  # YOLOv5 training checkpoints prefer the EMA
    if hasattr(obj, "state_dict"):
        obj = obj.float().state_dict()
    if not isinstance(obj, dict):
        raise SystemExit(f"unsupported checkpoint content: {type(obj).__name__}")
    out = {}
    for k, v in obj.items():
        if not torch.is_tensor(v):
            raise SystemExit(f"entry {k!r} is a {type(v).__name__}, not a tensor")
        out[str(k)] = v.detach().float().cpu() if v.is_floating_point() else v.detach().cpu()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("weights", help="YOLOv5 .pt checkpoint or state_dict file")
    ap.add_argument("output", help="where to write the plain dict")
    ap.add_argument("--yolov5", default=".", help="YOLOv5 checkout for unpickling (default: .)")
    a = ap.parse_args()
    sys.path.insert(0, a.yolov5)
    sd = to_state_dict(torch.load(a.weights, map_location="cpu"))
    torch.save(sd, a.output)  # a plain dict in zip format
    print(f"wrote {len(sd)} tensors to {a.output}")


if __name__ == "__main__":
    main()

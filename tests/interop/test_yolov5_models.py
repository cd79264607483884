"""Every YOLOv5 7.0 architecture we ship or read, against the yolov5 package's own Model:
1. each hub config (models/hub, the P6 family included) and configs/models/yolov5*.yaml: the same
   parameter count, state_dict names and shapes, and strides;
2. YOLOv5 .pt files (stripped, float16, as YOLOv5 saves them) of small variants that use every
   module of models/common.py we build, a LeakyReLU model and a model with `anchors: 4`: our
   loader and forward give YOLOv5's decoded output (within 1e-4 relative), fused and unfused,
   and with test-time augmentation YOLOv5's forward(x, augment=True) (non-square images too);
3. our val on the yolov5n6 and yolov5s-ghost .pt files gives YOLOv5's val.py mAP50 and
   mAP50-95 within 0.002 (labels: the model's own detect.py boxes on generated images);
4. export writes each of them (every module but C3TR, Contract and Expand, which it refuses by
   name; every activation) as TorchScript and ONNX files that give YOLOv5's output in
   torch.jit.load and onnxruntime.
Usage: test_yolov5_models.py BIN_DIR OUT_DIR"""
import contextlib
import copy
import glob
import logging
import os
import re
import shutil
import subprocess
import sys

import torch
import yaml

from interop_common import ROOT, fail

BIN, OUT = sys.argv[1], sys.argv[2]
os.makedirs(OUT, exist_ok=True)
PROBE = os.path.join(BIN, "model_probe")
from yolov5.models import common, yolo  # noqa: E402
from yolov5.utils.general import LOGGER  # noqa: E402

LOGGER.setLevel(logging.WARNING)  # not its model tables

HUB = os.path.join(os.path.dirname(yolo.__file__), "hub")


def build(cfg, nc=None):
    """YOLOv5's Model; Conv's class-wide activation is put back after (a YAML may change it)."""
    try:
        return yolo.Model(cfg, ch=3, nc=nc)
    finally:
        common.Conv.default_act = torch.nn.SiLU()


def probe(*args):
    p = subprocess.run([PROBE, *args], capture_output=True, text=True)
    if p.returncode:
        fail(f"model_probe {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p.stdout


# 1. Summaries.
configs = sorted(glob.glob(os.path.join(HUB, "*.yaml")))
configs = [c for c in configs if "backbone" in yaml.safe_load(open(c))]
# Ours in YOLOv5's schema (the anchor-free ones are test_ultralytics_models.py's).
configs += sorted(c for c in glob.glob(os.path.join(ROOT, "configs", "models", "*.yaml"))
                  if "anchors" in yaml.safe_load(open(c)))
for cfg in configs:
    name = os.path.relpath(cfg, os.path.dirname(HUB) if cfg.startswith(HUB) else ROOT)
    theirs = build(cfg)
    ours = probe("summary", cfg).splitlines()
    params = int(next(line for line in ours if line.startswith("params ")).split()[1])
    entries = {line.split()[1]: line.split()[2] for line in ours if line.startswith("entry ")}
    strides = [int(s) for s in next(l for l in ours if l.startswith("strides")).split()[1:]]
    want = {k: "x".join(map(str, v.shape)) or "scalar" for k, v in theirs.state_dict().items()}
    n_params = sum(p.numel() for p in theirs.parameters())
    if params != n_params:
        fail(f"{name}: {params} parameters, YOLOv5 builds {n_params}")
    if entries != want:
        diff = sorted(set(entries.items()) ^ set(want.items()))[:6]
        fail(f"{name}: state_dict entries differ from YOLOv5's, e.g. {diff}")
    if strides != [int(s) for s in theirs.stride.tolist()]:
        fail(f"{name}: strides {strides}, YOLOv5's {theirs.stride.tolist()}")
    print(f"{name}: {params} parameters, {len(entries)} state_dict entries, strides {strides}: "
          "as YOLOv5's")
    del theirs

# 2. Outputs of YOLOv5 .pt files.
ALL_MODULES = {
    "nc": 3, "depth_multiple": 0.33, "width_multiple": 0.25,
    "anchors": [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]],
    "backbone": [
        [-1, 1, "Focus", [32, 3]],
        [-1, 1, "DWConv", [64, 3, 2]],
        [-1, 1, "BottleneckCSP", [64]],
        [-1, 1, "Conv", [128, 3, 2]],
        [-1, 2, "C3x", [128]],
        [-1, 1, "CrossConv", [128, 3, 1, 1, 1.0, True]],
        [-1, 1, "GhostConv", [256, 3, 2]],
        [-1, 1, "GhostBottleneck", [256, 3, 2]],
        [-1, 1, "C3SPP", [256, [3, 5, 7]]],
        [-1, 1, "SPP", [256, [5, 9, 13]]],
        [-1, 1, "Contract", [2]],
        [-1, 1, "Expand", [2]],
    ],
    "head": [
        [-1, 1, "nn.Upsample", [None, 2, "nearest"]],
        [[-1, 6], 1, "Concat", [1]],
        [-1, 1, "C3TR", [128]],
        [-1, 2, "C3Ghost", [128]],
        [[4, 15, 11], 1, "Detect", ["nc", "anchors"]],
    ],
}


def small(cfg, **changes):
    d = yaml.safe_load(open(cfg))
    d.update(depth_multiple=0.33, width_multiple=0.125, **changes)
    return d


# What export writes: every module above but C3TR, Contract and Expand.
EXPORTABLE = copy.deepcopy(ALL_MODULES)
EXPORTABLE["backbone"] = EXPORTABLE["backbone"][:10]
EXPORTABLE["head"][2] = [-1, 1, "C3", [128]]
EXPORTABLE["head"][4] = [[4, 13, 9], 1, "Detect", ["nc", "anchors"]]
NOT_EXPORTABLE = {"all_modules": "Contract", "yolov5s-transformer": "C3TR's transformer block"}
ACTIVATIONS = ["nn.ReLU()", "nn.ReLU6()", "nn.Hardswish()", "nn.Sigmoid()", "nn.Tanh()",
               "nn.GELU()", "nn.Mish()", "nn.ELU(alpha=0.5)"]


cases = {
    "all_modules": ALL_MODULES,
    "exportable_modules": EXPORTABLE,
    "yolov3-tiny": small(os.path.join(HUB, "yolov3-tiny.yaml")),
    "yolov5n6": small(os.path.join(ROOT, "configs", "models", "yolov5n6.yaml")),
    "yolov5s-ghost": small(os.path.join(HUB, "yolov5s-ghost.yaml")),
    "yolov5s-transformer": small(os.path.join(HUB, "yolov5s-transformer.yaml")),
    "yolov5s-LeakyReLU": small(os.path.join(HUB, "yolov5s-LeakyReLU.yaml")),
    "yolov3-spp": small(os.path.join(HUB, "yolov3-spp.yaml")),
    "yolov5-p7": small(os.path.join(HUB, "yolov5-p7.yaml")),
    "anchors4": small(os.path.join(ROOT, "configs", "models", "yolov5n.yaml"), anchors=4),
}
for act in ACTIVATIONS:  # every activation a model YAML may name, exported
    cases["act_" + act[3:act.index("(")]] = small(
        os.path.join(ROOT, "configs", "models", "yolov5n.yaml"), activation=act)
def check_export(name, weights, want):
    """export's TorchScript (torch.jit.load) and ONNX (onnxruntime) files give YOLOv5's output, or
    export refuses the model naming the module it cannot write."""
    p = subprocess.run([os.path.join(BIN, "export"), "--weights", weights, "--include",
                        "torchscript", "onnx", "--imgsz", "128", "--dynamic"],
                       capture_output=True, text=True)
    stem = os.path.splitext(weights)[0]
    if name in NOT_EXPORTABLE:
        if p.returncode == 0 or NOT_EXPORTABLE[name] not in p.stderr:
            fail(f"export {name}: exit {p.returncode}, expected a refusal naming "
                 f"{NOT_EXPORTABLE[name]}: {p.stderr[-500:]}")
        if os.path.exists(stem + ".onnx") or os.path.exists(stem + ".torchscript"):
            fail(f"export {name}: refused, yet left a file behind")
        print(f"{name}: export refuses it ({NOT_EXPORTABLE[name]})")
        return
    if p.returncode:
        fail(f"export {name}: exit {p.returncode}: {p.stderr[-1500:]}")
    import onnxruntime
    sess = onnxruntime.InferenceSession(stem + ".onnx", providers=["CPUExecutionProvider"])
    got_onnx = torch.from_numpy(sess.run(None, {"images": x.numpy()})[0])
    with torch.no_grad():
        got_ts = torch.jit.load(stem + ".torchscript")(x)
    for who, got in (("onnxruntime", got_onnx), ("torch.jit.load", got_ts)):
        if got.shape != want.shape:
            fail(f"export {name}: {who} output {tuple(got.shape)}, YOLOv5's {tuple(want.shape)}")
        err = ((got - want).abs() / (want.abs() + 1)).max().item()
        if err > 1e-4:
            fail(f"export {name}: {who}'s output differs from YOLOv5's by {err:.2e}")
    print(f"{name}: exported TorchScript and ONNX give YOLOv5's output")


torch.manual_seed(0)
x = torch.rand(2, 3, 128, 128)
torch.save({"x": x}, os.path.join(OUT, "x.pt"))
x_tta = torch.rand(1, 3, 128, 192)
torch.save({"x": x_tta}, os.path.join(OUT, "x_tta.pt"))
for name, d in cases.items():
    cfg = os.path.join(OUT, name + ".yaml")
    with open(cfg, "w") as f:
        yaml.safe_dump(d, f, sort_keys=False)
    model = build(cfg, nc=3)
    with torch.no_grad():  # BatchNorm statistics that are not the identity
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    model = model.half().float()  # the values the float16 file holds
    model.names = ["a", "b", "c"]
    model.nc = 3  # as YOLOv5's train.py sets it (its val.py reads it)
    model.eval()
    with torch.no_grad():
        want = model(x)[0]
        # YOLOv5's own augmented forward fails where the scaled images do not divide by a
        # model's deepest stride (all_modules' Contract at 64, the P7 head at 128).
        try:
            want_tta = model(x_tta, augment=True)[0]
        except RuntimeError:
            want_tta = None
    weights = os.path.join(OUT, name + ".pt")
    torch.save({"epoch": -1, "best_fitness": None, "model": copy.deepcopy(model).half(),
                "ema": None, "updates": None, "optimizer": None, "opt": None}, weights)
    for fused in ("", "fused"):
        out = os.path.join(OUT, f"{name}_y{fused}.pt")
        probe("forward", weights, os.path.join(OUT, "x.pt"), out, *([fused] if fused else []))
        got = torch.load(out)["y"]
        if got.shape != want.shape:
            fail(f"{name}{' fused' if fused else ''}: output {tuple(got.shape)}, YOLOv5's "
                 f"{tuple(want.shape)}")
        err = ((got - want).abs() / (want.abs() + 1)).max().item()
        if err > 1e-4:
            fail(f"{name}{' fused' if fused else ''}: output differs from YOLOv5's by {err:.2e}")
    check_export(name, weights, want)
    if want_tta is None:
        print(f"{name}: YOLOv5's float16 .pt, output {tuple(want.shape)} as YOLOv5's, fused and "
              f"not (largest relative difference {err:.1e}); YOLOv5's augmented forward cannot "
              f"run it at {tuple(x_tta.shape[2:])}")
        continue
    out = os.path.join(OUT, f"{name}_tta.pt")
    probe("forward", weights, os.path.join(OUT, "x_tta.pt"), out, "augment")
    got = torch.load(out)["y"]
    if got.shape != want_tta.shape:
        fail(f"{name} augment: output {tuple(got.shape)}, YOLOv5's {tuple(want_tta.shape)}")
    err_tta = ((got - want_tta).abs() / (want_tta.abs() + 1)).max().item()
    if err_tta > 1e-4:
        fail(f"{name} augment: output differs from YOLOv5's by {err_tta:.2e}")
    print(f"{name}: YOLOv5's float16 .pt, output {tuple(want.shape)} as YOLOv5's, fused and not "
          f"(largest relative difference {err:.1e}); augmented {tuple(want_tta.shape)} as "
          f"YOLOv5's ({err_tta:.1e})")


def val_against_yolov5(name, imgsz=128):
    """Our val on a YOLOv5 .pt gives val.py's mAP50 and mAP50-95 within 0.002. The labels are the
    model's own detect.py boxes (its 20 most confident) on generated images of several sizes, so
    that its random-weight predictions score well above zero."""
    import numpy as np
    from yolov5 import detect as y5detect, val as y5val
    root = os.path.join(OUT, "val_" + name)
    images = os.path.join(root, "images", "val")
    os.makedirs(images, exist_ok=True)
    rng = np.random.default_rng(0)
    import cv2
    for i in range(12):
        h, w = [(192, 256), (256, 192), (160, 160)][i % 3]
        im = np.full((h, w, 3), 114, np.uint8)
        for _ in range(4):
            x0, y0 = int(rng.integers(0, w - 40)), int(rng.integers(0, h - 40))
            im[y0:y0 + int(rng.integers(20, 40)), x0:x0 + int(rng.integers(20, 40))] = \
                rng.integers(0, 255, 3)
        cv2.imwrite(os.path.join(images, f"im{i}.jpg"), im)
    weights = os.path.join(OUT, name + ".pt")
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        y5detect.run(weights=weights, source=images, imgsz=(imgsz, imgsz), conf_thres=1e-4,
                     max_det=20, device="cpu", save_txt=True, nosave=True, project=root,
                     name="pseudo", exist_ok=True)
    labels = os.path.join(root, "labels", "val")
    shutil.rmtree(labels, ignore_errors=True)
    shutil.copytree(os.path.join(root, "pseudo", "labels"), labels)
    data = os.path.join(root, "data.yaml")
    with open(data, "w") as f:
        f.write(f"path: {root}\ntrain: images/val\nval: images/val\nnames: [a, b, c]\n")
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        (_, _, ref50, ref5095, *_), *_ = y5val.run(
            data=data, weights=weights, batch_size=4, imgsz=imgsz, conf_thres=0.001,
            iou_thres=0.6, device="cpu", workers=0, plots=False, project=root, name="ref",
            exist_ok=True)
    for f in glob.glob(os.path.join(root, "labels", "*.cache")):
        os.remove(f)  # ours writes its own
    p = subprocess.run([os.path.join(BIN, "val"), "--weights", weights, "--data", data,
                        "--imgsz", str(imgsz), "--batch-size", "4", "--noplots", "--project",
                        root, "--name", "ours"], capture_output=True, text=True)
    m = re.search(r"^\s+all\s+\d+\s+\d+\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s*$",
                  p.stdout + p.stderr, re.M)
    if p.returncode or not m:
        fail(f"val on {name}.pt: exit {p.returncode}, no 'all' row: {(p.stdout + p.stderr)[-800:]}")
    m50, m5095 = float(m.group(1)), float(m.group(2))
    if ref50 < 0.1:
        fail(f"val on {name}.pt: val.py's mAP50 is {ref50:.3f}; the comparison needs more")
    if abs(m50 - ref50) > 0.002 or abs(m5095 - ref5095) > 0.002:
        fail(f"val on {name}.pt: mAP50 {m50}, mAP50-95 {m5095}; val.py's {ref50:.4f}, "
             f"{ref5095:.4f} (tolerance 0.002)")
    print(f"{name}: our val gives val.py's mAP50 {ref50:.4f} and mAP50-95 {ref5095:.4f} "
          f"(ours {m50}, {m5095}) on 12 images of 3 sizes")


val_against_yolov5("yolov5n6")
val_against_yolov5("yolov5s-ghost")
print("PASS")

"""Our detect against Ultralytics 8.4.190's predict on the same files and images, on the same
torch: milliseconds per image (pre-process, inference and NMS, as each reports them; the images
one at a time; Ultralytics' after one warm-up image), and how many boxes each finds. The files:
an Ultralytics .pt, and our export of it as TorchScript and ONNX (our detect runs ONNX through
OpenCV's dnn module, Ultralytics through onnxruntime).

Usage (through scripts/bench_detect_vs_ultralytics.sh): bench_detect_vs_ultralytics.py
       --detect BIN --source DIR --out DIR [--cfg yolo11n.yaml] [--imgsz 640] [--threads 2]"""
import argparse
import copy
import glob
import os
import re
import shutil
import subprocess
import sys

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--detect", required=True)
ap.add_argument("--source", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--cfg", default="yolo11n.yaml")
ap.add_argument("--imgsz", type=int, default=640)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
torch.set_num_threads(a.threads)

from ultralytics import YOLO  # noqa: E402
from ultralytics.nn.tasks import DetectionModel  # noqa: E402

# An untrained model of the YAML, saved as Ultralytics' trainer leaves a best.pt (float16). Its
# class logits are raised so that NMS has boxes to sort, as a trained model's would.
torch.manual_seed(0)
m = DetectionModel(a.cfg, ch=3, nc=80, verbose=False).eval()
with torch.no_grad():
    for seq in [*m.model[-1].cv3, *(getattr(m.model[-1], "one2one_cv3", None) or [])]:
        seq[-1].bias.add_(9.0)
pt = os.path.join(a.out, "model.pt")
torch.save({"model": copy.deepcopy(m).half(), "ema": None, "optimizer": None, "epoch": -1,
            "train_args": {"task": "detect"}, "version": "8.4.190"}, pt)
images = sorted(glob.glob(os.path.join(a.source, "*.jpg")))

env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), YOLO_FIXED_THREADS="1")


def theirs(weights, **kwargs):
    ul = YOLO(weights, task="detect")
    ul.predict(images[0], imgsz=a.imgsz, device="cpu", verbose=False, **kwargs)  # warm-up
    speeds, boxes = [], 0
    for f in images:
        r = ul.predict(f, imgsz=a.imgsz, device="cpu", verbose=False, iou=0.7, **kwargs)[0]
        speeds.append(r.speed)
        boxes += len(r.boxes)
    parts = {k: sum(s[k] for s in speeds) / len(speeds)
             for k in ("preprocess", "inference", "postprocess")}
    return sum(parts.values()), boxes, parts


def ours(weights, name, *args):
    p = subprocess.run([a.detect, "--weights", weights, "--source", a.source,
                        "--imgsz", str(a.imgsz), "--max-det", "300", "--device", "cpu",
                        "--nosave", "--save-txt", "--project", a.out, "--name", name,
                        "--exist-ok", *args], env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit(p.stderr[-2000:])
    ms = re.search(r"Speed: ([\d.]+)ms per image", p.stdout + p.stderr)
    if not ms:
        sys.exit("no speed line from detect: " + (p.stdout + p.stderr)[-500:])
    boxes = sum(len(open(x).readlines())
                for x in glob.glob(os.path.join(a.out, name, "labels", "*.txt")))
    return float(ms.group(1)), boxes


p = subprocess.run([os.path.join(os.path.dirname(a.detect), "export"), "--weights", pt,
                    "--include", "torchscript", "onnx", "--imgsz", str(a.imgsz), "--device",
                    "cpu"], env=env, capture_output=True, text=True)
if p.returncode:
    sys.exit(p.stderr[-2000:])
print(f"{a.cfg}, {len(images)} images from {a.source}, imgsz {a.imgsz}, {a.threads} threads")
print("| ms per image (pre-process + inference + NMS) | ours | Ultralytics 8.4.190 | ours / theirs "
      "| boxes (ours, theirs) |")
print("|---|---|---|---|---|")
notes = []
for what, f in (("Ultralytics' .pt", pt), ("our TorchScript export", pt[:-3] + ".torchscript"),
                ("our ONNX export", pt[:-3] + ".onnx")):
    shutil.rmtree(os.path.join(a.out, "ours"), ignore_errors=True)  # --save-txt appends
    our_ms, our_n = ours(f, "ours")
    their_ms, their_n, parts = theirs(f)
    print(f"| {what} | {our_ms:.1f} | {their_ms:.1f} | {our_ms / their_ms:.2f} | "
          f"{our_n}, {their_n} |")
    notes.append(f"{what}: Ultralytics' parts pre-process {parts['preprocess']:.1f}, inference "
                 f"{parts['inference']:.1f}, NMS {parts['postprocess']:.1f} ms")
print("\n".join(notes))

# An end-to-end model (YOLO26): its one-to-one head's top-k without NMS against the default
# one-to-many head with NMS, both trainers, on the .pt file and on files exported both ways (our
# detect cannot run the end-to-end ONNX file: OpenCV 4.6's dnn module has no TopK layer).
if getattr(m.model[-1], "one2one_cv3", None) is not None:
    e2e = os.path.join(a.out, "model_e2e.pt")
    shutil.copy(pt, e2e)
    p = subprocess.run([os.path.join(os.path.dirname(a.detect), "export"), "--weights", e2e,
                        "--include", "torchscript", "onnx", "--imgsz", str(a.imgsz), "--device",
                        "cpu", "--end2end"], env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit(p.stderr[-2000:])
    print("\n| ms per image (pre-process + inference + post-processing) | ours | "
          "Ultralytics 8.4.190 | ours / theirs | boxes (ours, theirs) |")
    print("|---|---|---|---|---|")
    ts, onnx = (e2e[:-3] + ext for ext in (".torchscript", ".onnx"))
    rows = (
        (".pt: one-to-many head + NMS", pt, [], {}, True),
        (".pt: one-to-one head, top-k (--end2end, nms=False)", pt, ["--end2end"], {"nms": False},
         True),
        ("TorchScript: one-to-many head + NMS", pt[:-3] + ".torchscript", [], {}, True),
        ("TorchScript exported --end2end", ts, [], {}, True),
        ("ONNX: one-to-many head + NMS", pt[:-3] + ".onnx", [], {}, True),
        ("ONNX exported --end2end (Ultralytics: onnxruntime)", onnx, [], {}, False))
    for what, f, our_args, their_args, run_ours in rows:
        shutil.rmtree(os.path.join(a.out, "ours"), ignore_errors=True)
        their_ms, their_n, parts = theirs(f, **their_args)
        if not run_ours:
            print(f"| {what} | - | {their_ms:.1f} | - | -, {their_n} |")
            continue
        our_ms, our_n = ours(f, "ours", *our_args)
        print(f"| {what} | {our_ms:.1f} | {their_ms:.1f} | {our_ms / their_ms:.2f} | "
              f"{our_n}, {their_n} |")

"""Our detect against Ultralytics 8.4.190's predict on the same .pt file and images, on the same
torch: milliseconds per image (pre-process, inference and NMS, as each reports them; the images
one at a time; Ultralytics' after one warm-up image), and how many boxes each finds.

Usage (through scripts/bench_detect_vs_ultralytics.sh): bench_detect_vs_ultralytics.py
       --detect BIN --source DIR --out DIR [--cfg yolo11n.yaml] [--imgsz 640] [--threads 2]"""
import argparse
import copy
import glob
import os
import re
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
    for seq in m.model[-1].cv3:
        seq[-1].bias.add_(9.0)
pt = os.path.join(a.out, "model.pt")
torch.save({"model": copy.deepcopy(m).half(), "ema": None, "optimizer": None, "epoch": -1,
            "train_args": {"task": "detect"}, "version": "8.4.190"}, pt)
images = sorted(glob.glob(os.path.join(a.source, "*.jpg")))

ul = YOLO(pt)
ul.predict(images[0], imgsz=a.imgsz, device="cpu", verbose=False)  # warm-up
speeds, theirs = [], 0
for f in images:
    r = ul.predict(f, imgsz=a.imgsz, device="cpu", verbose=False, iou=0.7)[0]
    speeds.append(r.speed)
    theirs += len(r.boxes)
t = {k: sum(s[k] for s in speeds) / len(speeds) for k in ("preprocess", "inference", "postprocess")}

env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), YOLO_FIXED_THREADS="1")
p = subprocess.run([a.detect, "--weights", pt, "--source", a.source, "--imgsz", str(a.imgsz),
                    "--iou-thres", "0.7", "--max-det", "300", "--device", "cpu", "--nosave",
                    "--save-txt", "--project", a.out, "--name", "ours", "--exist-ok"],
                   env=env, capture_output=True, text=True)
if p.returncode:
    sys.exit(p.stderr[-2000:])
ms = re.search(r"Speed: ([\d.]+)ms per image", p.stdout + p.stderr)
ours = sum(len(open(x).readlines())
           for x in glob.glob(os.path.join(a.out, "ours", "labels", "*.txt")))
if not ms:
    sys.exit("no speed line from detect: " + (p.stdout + p.stderr)[-500:])
theirs_ms = sum(t.values())
print(f"{a.cfg}, {len(images)} images from {a.source}, imgsz {a.imgsz}, {a.threads} threads")
print("| ms per image (pre-process + inference + NMS) | ours | Ultralytics 8.4.190 | ours / theirs |")
print("|---|---|---|---|")
print(f"| detect / predict, one image at a time | {float(ms.group(1)):.1f} | {theirs_ms:.1f} | "
      f"{float(ms.group(1)) / theirs_ms:.2f} |")
print(f"Ultralytics' parts: pre-process {t['preprocess']:.1f}, inference {t['inference']:.1f}, "
      f"NMS {t['postprocess']:.1f} ms; boxes: ours {ours}, Ultralytics {theirs}")

"""Our train against Ultralytics 8.4.190's on the same data, model YAML, settings and torch: the
whole run's seconds (set-up, every epoch's training and validation, the final validation), the
steady epoch (training and validation, from the end of epoch 1 to the end of the last, per epoch),
the peak resident memory, and each epoch's mAP50-95.

Both train from scratch with AdamW at Ultralytics' `optimizer=auto` choice for a short run
(lr0 = 0.01 / (4 + nc), beta1 0.9, bias warmup from 0), mosaic on throughout (close_mosaic 0),
no AMP, the given threads. Run through scripts/bench_vs_ultralytics.sh.

Usage: bench_vs_ultralytics.py --train BIN --data DATA.yaml --out DIR [--cfg yolo11n.yaml]
       [--imgsz 128] [--batch 16] [--epochs 10] [--seed 0] [--threads 2]"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import time

import yaml

ap = argparse.ArgumentParser()
ap.add_argument("--train", required=True)
ap.add_argument("--data", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--cfg", default="yolo11n.yaml")
ap.add_argument("--imgsz", type=int, default=128)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
nc = len(yaml.safe_load(open(a.data))["names"])
lr0 = round(0.01 / (4 + nc), 6)
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
hyp = yaml.safe_load(open(os.path.join(root, "hyp", "hyp.anchor-free.yaml")))
hyp.update(lr0=lr0, momentum=0.9, warmup_bias_lr=0.0)
hyp_file = os.path.join(a.out, "hyp.yaml")
yaml.safe_dump(hyp, open(hyp_file, "w"), sort_keys=False)


def results(csv_path):
    rows = list(csv.DictReader(open(csv_path)))
    return [{k.strip(): float(v) for k, v in r.items()} for r in rows]


def run(cmd, env, log, epoch_end=None):
    """Runs cmd with its output in log; returns the wall seconds and the times (from the start)
    at which lines starting with epoch_end appeared."""
    t0 = time.time()
    marks = []
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace")
        for line in p.stdout:  # universal newlines: progress bars' carriage returns end lines
            f.write(line)
            if epoch_end and line.strip().startswith(epoch_end):
                marks.append(time.time() - t0)
        p.wait()
    if p.returncode:
        sys.exit(f"{cmd[0]} failed; see {log}")
    return time.time() - t0, marks


def steady(ends):
    """Seconds per epoch after the first, from the times at which epochs ended."""
    return (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else float("nan")


env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), YOLO_FIXED_THREADS="1")
ours_dir = os.path.join(a.out, "ours")
# Each run in an empty folder: a run into an existing one appends to its results.csv (YOLOv5's
# behaviour, and ours), which would mix an earlier run's epochs into this one's.
shutil.rmtree(ours_dir, ignore_errors=True)
cmd = [a.train, "--data", a.data, "--cfg", a.cfg, "--hyp", hyp_file, "--optimizer", "AdamW",
       "--imgsz", str(a.imgsz), "--batch-size", str(a.batch), "--epochs", str(a.epochs),
       "--seed", str(a.seed), "--close-mosaic", "0", "--workers", "0", "--device", "cpu",
       "--noplots", "--project", ours_dir, "--name", "exp", "--exist-ok"]
ours_log = os.path.join(a.out, "ours.log")
# Each epoch ends with validation's "all" row.
ours_total, ours_ends = run(["/usr/bin/time", "-v", *cmd], env, ours_log, epoch_end="all ")
ours_rss = [int(line.split()[-1]) for line in open(ours_log) if "Maximum resident" in line][0]
ours_map = [r["metrics/mAP_0.5:0.95"] for r in results(os.path.join(ours_dir, "exp", "results.csv"))]

# Ultralytics reads the same images and labels from a folder of its own: both trainers write a
# labels/*.cache file, each in its own format.
d = yaml.safe_load(open(a.data))
src = os.path.join(os.path.dirname(os.path.abspath(a.data)), d.get("path", "."))
mirror = os.path.join(a.out, "ultralytics_data")
shutil.rmtree(mirror, ignore_errors=True)
os.makedirs(mirror)
os.symlink(os.path.join(src, "images"), os.path.join(mirror, "images"))
shutil.copytree(os.path.join(src, "labels"), os.path.join(mirror, "labels"),
                ignore=shutil.ignore_patterns("*.cache"))
ul_data = os.path.join(a.out, "ultralytics_data.yaml")
yaml.safe_dump({"path": mirror, "train": d["train"], "val": d["val"], "names": d["names"]},
               open(ul_data, "w"))

# Ultralytics, in a child process so its resident memory is its own.
theirs_dir = os.path.join(a.out, "ultralytics")
shutil.rmtree(theirs_dir, ignore_errors=True)
script = f"""
import torch
torch.set_num_threads({a.threads})
from ultralytics import YOLO
YOLO({a.cfg!r}).train(data={ul_data!r}, epochs={a.epochs}, imgsz={a.imgsz}, batch={a.batch},
    workers=0, device="cpu", optimizer="AdamW", lr0={lr0}, momentum=0.9, warmup_bias_lr=0.0,
    close_mosaic=0, amp=False, plots=False, seed={a.seed}, project={theirs_dir!r}, name="exp",
    exist_ok=True, verbose=False)
"""
theirs_log = os.path.join(a.out, "ultralytics.log")
theirs_total, _ = run(["/usr/bin/time", "-v", sys.executable, "-c", script], env, theirs_log)
rows = results(os.path.join(theirs_dir, "exp", "results.csv"))
theirs_ends = [r["time"] for r in rows]  # seconds from the start of training to each epoch's end
theirs_rss = [int(line.split()[-1]) for line in open(theirs_log) if "Maximum resident" in line][0]
theirs_map = [r["metrics/mAP50-95(B)"] for r in rows]


print(f"{a.cfg} from scratch, {a.epochs} epochs, imgsz {a.imgsz}, batch {a.batch}, "
      f"{a.threads} threads, AdamW lr0 {lr0}")
print("| | ours | Ultralytics 8.4.190 | ours / theirs |")
print("|---|---|---|---|")
print(f"| whole run, s | {ours_total:.0f} | {theirs_total:.0f} | {ours_total / theirs_total:.2f} |")
ours_epoch, theirs_epoch = steady(ours_ends[:a.epochs]), steady(theirs_ends)
print(f"| steady epoch, s | {ours_epoch:.2f} | {theirs_epoch:.2f} | {ours_epoch / theirs_epoch:.2f} |")
print(f"| peak resident memory, MB | {ours_rss / 1024:.0f} | {theirs_rss / 1024:.0f} | "
      f"{ours_rss / theirs_rss:.2f} |")
print("mAP50-95 per epoch, ours:       " + " ".join(f"{v:.3f}" for v in ours_map))
print("mAP50-95 per epoch, Ultralytics: " + " ".join(f"{v:.3f}" for v in theirs_map))

#!/usr/bin/env python3
"""Learning curves side by side: our build/bin/train against YOLOv5 v7.0's train.py (the `yolov5`
7.0.14 package from PyPI, on the same torch), both from scratch on the same data, model, image
size, batch, hyperparameters (--hyp, default hyp.scratch-low) and optimizer, over several
seeds.

Every run validates each epoch and writes results.csv. Each run length in --epochs is its own set
of runs (the LR schedule depends on the total); runs go --jobs at a time, ours and YOLOv5
interleaved so load drift hits both, each with OMP_NUM_THREADS = cores // jobs (--threads), and
each on a private copy of the data (both trainers write label caches beside the labels). Then, per
length E, in OUT (epochs count from 1):
  summary_e{E}.md  final and best mAP50 over the seeds, final mAP50-95, the epoch at which each
                   seed's mAP50 first reaches --threshold, wall time per run, whether the gap in
                   final mAP50 is within the seeds' spread, and mAP per epoch (also printed)
  curves_e{E}.csv  epoch, trainer, metric, mean, sd, min, max over the seeds, for mAP50, mAP50-95
                   and the six train/val losses
  curves_e{E}.png  those curves: mean lines in min-max bands
Logs are OUT/logs/<run>.log and the runs OUT/runs/<run>/; a failed run stops everything and names
its log. --resume-existing keeps runs whose results.csv is complete.

Run it through scripts/quality_vs_yolov5.sh (the test venv's Python, with YOLOv5 and matplotlib):
  scripts/quality_vs_yolov5.sh                         # shapes, yolov5n, 256 px, 30 epochs, 5 seeds
  scripts/quality_vs_yolov5.sh --data coco128 --epochs 30,60 --resume-existing
  scripts/quality_vs_yolov5.sh --smoke --out /tmp/q    # the plumbing only, a minute or two"""
import argparse
import csv
import importlib.metadata
import importlib.util
import math
import os
import shutil
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import yaml

from yolov5_side import (ROOT, SHAPES_NAMES, copy_dataset, image_files, run, shapes_data,
                         yolov5_env)

PROG = "quality_vs_yolov5"
LABELS = {"ours": "ours", "yolov5": "YOLOv5"}
MAP50, MAP = "metrics/mAP_0.5", "metrics/mAP_0.5:0.95"
# (results.csv column, plot title); the plot is two rows: mAP50 and the train losses, mAP50-95
# and the val losses.
METRICS = [(MAP50, "mAP50"), (MAP, "mAP50-95"), ("train/box_loss", "train box loss"),
           ("train/obj_loss", "train obj loss"), ("train/cls_loss", "train cls loss"),
           ("val/box_loss", "val box loss"), ("val/obj_loss", "val obj loss"),
           ("val/cls_loss", "val cls loss")]
GRID = [0, 2, 3, 4, 1, 5, 6, 7]
DEFAULTS = dict(imgsz=256, batch=16, epochs="30", seeds=5, jobs=2, threads=0, max_images=0)
# Small enough for CI on 2 cores: 16 train + 16 val images at 64 px, 2 batches an epoch.
SMOKE = dict(imgsz=64, batch=8, epochs="2", seeds=2, jobs=1, threads=1, max_images=16)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="shapes", help="shapes, coco128 (../shared/datasets/coco128 "
                    "beside the repository) or a dataset YAML whose train/val are folders")
    ap.add_argument("--cfg", default="yolov5n")
    ap.add_argument("--imgsz", type=int, help=f"default {DEFAULTS['imgsz']}")
    ap.add_argument("--batch", type=int, help=f"default {DEFAULTS['batch']}")
    ap.add_argument("--hyp", default="hyp.scratch-low.yaml",
                    help="a file in hyp/ or a path, given to both trainers")
    ap.add_argument("--optimizer", default="SGD", choices=("SGD", "Adam", "AdamW"))
    ap.add_argument("--epochs", help="run lengths, comma-separated, each its own set of runs "
                    f"(default {DEFAULTS['epochs']})")
    ap.add_argument("--seeds", type=int, help=f"seeds 0..N-1 (default {DEFAULTS['seeds']})")
    ap.add_argument("--threshold", type=float, default=0.5,
                    help="the mAP50 whose first epoch reached is reported")
    ap.add_argument("--jobs", type=int, help=f"runs at a time (default {DEFAULTS['jobs']})")
    ap.add_argument("--threads", type=int,
                    help="OMP_NUM_THREADS of each run (default: max(1, cores // jobs))")
    ap.add_argument("--max-images", type=int,
                    help="use the first N train and the first N val images (default: all)")
    ap.add_argument("--trainers", default="ours,yolov5")
    ap.add_argument("--train", default=str(ROOT / "build/bin/train"))
    ap.add_argument("--out", default=str(ROOT / "runs/quality_vs_yolov5"))
    ap.add_argument("--resume-existing", action="store_true",
                    help="keep runs whose results.csv already has every epoch")
    ap.add_argument("--smoke", action="store_true", help="defaults for a quick check: "
                    + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in SMOKE.items()))
    args = ap.parse_args()
    for k, v in (SMOKE if args.smoke else DEFAULTS).items():
        if getattr(args, k) is None:  # flags given beside --smoke win
            setattr(args, k, v)
    args.lengths = sorted({int(e) for e in str(args.epochs).split(",") if e.strip()})
    args.trainers = [t.strip() for t in args.trainers.split(",") if t.strip()]
    if not args.lengths or min(args.lengths) < 1:
        ap.error("--epochs: one or more run lengths >= 1")
    if not args.trainers or set(args.trainers) - set(LABELS):
        ap.error("--trainers: ours and/or yolov5")
    if args.seeds < 1 or args.jobs < 1:
        ap.error("--seeds and --jobs must be >= 1")
    if not args.threads:
        args.threads = max(1, len(os.sched_getaffinity(0)) // args.jobs)
    return args


def coco_names():
    """COCO's 80 names: from YOLOv5's own coco128.yaml when the package is there, else ours."""
    spec = importlib.util.find_spec("yolov5")  # finds the package without importing torch
    for f in ([Path(spec.origin).parent / "data/coco128.yaml"] if spec and spec.origin else []) + [
            ROOT / "configs/data/coco128.yaml", ROOT / "configs/data/coco.yaml"]:
        if f.is_file():
            return yaml_names(yaml.safe_load(f.read_text())["names"])
    raise SystemExit(f"{PROG}: no coco128.yaml for COCO's class names")


def yaml_names(names):
    """A list of class names from a data YAML's names: a list, or a dict keyed by index."""
    return [names[k] for k in sorted(names)] if isinstance(names, dict) else list(names)


def dataset(args, env, out):
    """(description, root, splits, names) of --data; the shapes set is generated on first use."""
    if args.data == "shapes":
        root = shapes_data(args.train, args.cfg, env, out, PROG)
        return "shapes", root, {"train": "images/train", "val": "images/val"}, SHAPES_NAMES
    if args.data == "coco128":
        root = ROOT.parent / "shared/datasets/coco128"
        if not (root / "images/train2017").is_dir():
            raise SystemExit(f"{PROG}: coco128 is missing: no {root}/images/train2017 (a YOLO-"
                             "format folder with images/train2017 and labels/train2017 is expected "
                             "there)")
        # As YOLOv5's coco128.yaml: the 128 images are both the train and the val set.
        return "coco128", root, {"train": "images/train2017", "val": "images/train2017"}, \
            coco_names()
    f = Path(args.data)
    if not f.is_file():
        raise SystemExit(f"{PROG}: --data {args.data}: not shapes, coco128 or a YAML file")
    d = yaml.safe_load(f.read_text())
    # Relative dataset roots: beside the YAML (as ours reads them), else from the repository.
    p = Path(d.get("path") or ".")
    tried = [(f.parent / p).resolve(), (ROOT / p).resolve()]
    root = next((r for r in tried if r.is_dir()), None)
    if root is None:
        raise SystemExit(f"{PROG}: --data {f}: path {p} is not a folder (tried "
                         f"{' and '.join(map(str, dict.fromkeys(tried)))})")
    splits = {k: d[k] for k in ("train", "val")}
    for k, rel in splits.items():
        if not isinstance(rel, str) or not (root / rel).is_dir():
            raise SystemExit(f"{PROG}: --data {f}: {k}: {rel!r} is not a folder under {root}")
    return f.stem, root, splits, yaml_names(d["names"])


def read_results(path):
    """results.csv as {column: [values per epoch]}; YOLOv5 pads its header names with spaces."""
    with open(path, newline="") as fh:
        rows = [[c.strip() for c in r] for r in csv.reader(fh) if r]
    if not rows:
        return {}
    cols = {h: [float(r[i]) for r in rows[1:]] for i, h in enumerate(rows[0])}
    missing = [m for m, _ in METRICS if m not in cols]
    if missing:
        raise SystemExit(f"{PROG}: {path} has no column {', '.join(missing)} (has {rows[0]})")
    return cols


def complete(csv_path, epochs):
    try:
        return len(read_results(csv_path).get(MAP50, [])) >= epochs
    except (OSError, ValueError, SystemExit):
        return False


class Run:
    def __init__(self, trainer, epochs, seed, out):
        self.trainer, self.epochs, self.seed = trainer, epochs, seed
        self.name = f"{trainer}_e{epochs}_s{seed}"
        self.dir = out / "runs" / self.name
        self.log = out / "logs" / f"{self.name}.log"
        self.wall_file = out / "logs" / f"{self.name}.wall"
        self.results = None
        self.wall = math.nan

    def command(self, args, data_yaml, out):
        common = ["--data", str(data_yaml), "--cfg", f"{args.cfg}.yaml", "--imgsz",
                  str(args.imgsz), "--batch-size", str(args.batch), "--epochs", str(self.epochs),
                  "--seed", str(self.seed), "--project", str(out / "runs"), "--name", self.name,
                  "--hyp", str(args.hyp_path), "--optimizer", args.optimizer, "--exist-ok",
                  "--noplots"]
        if self.trainer == "ours":
            return [args.train] + common
        return [sys.executable, "-m", "yolov5.train", "--weights", ""] + common

    def load(self):
        if not (self.dir / "results.csv").is_file():
            raise SystemExit(f"{PROG}: {self.name} wrote no {self.dir}/results.csv; see {self.log}")
        self.results = read_results(self.dir / "results.csv")
        if self.wall_file.is_file():
            self.wall = float(self.wall_file.read_text())


def execute(runs, args, data, env, out):
    """Runs what is not done yet, args.jobs at a time; on the first failure stops the others and
    exits with that run's log."""
    _, root, splits, names = data
    todo = [r for r in runs
            if not (args.resume_existing and complete(r.dir / "results.csv", r.epochs))]
    for r in runs:
        if r not in todo:
            print(f"  {r.name}: complete, kept", flush=True)
    live, lock, done, stop = set(), threading.Lock(), [0], threading.Event()

    def one(r):
        # Each run its own data: runs of one trainer may overlap and write the same label cache.
        data_yaml = copy_dataset(root, splits, names, out / "data" / r.name, args.max_images)
        if stop.is_set():
            return
        if r.dir.exists():
            shutil.rmtree(r.dir)  # both trainers append to an existing results.csv
        run_env = dict(env, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
        wall, _ = run(r.command(args, data_yaml, out), run_env, r.log, PROG, live=live)
        r.wall_file.write_text(f"{wall:.1f}\n")
        shutil.rmtree(data_yaml.with_suffix(""))
        data_yaml.unlink()
        r.load()
        if len(r.results[MAP50]) < r.epochs:
            raise SystemExit(f"{PROG}: {r.dir}/results.csv has {len(r.results[MAP50])} of "
                             f"{r.epochs} epochs; see {r.log}")
        with lock:
            done[0] += 1
            print(f"  {r.name}: {wall:.1f} s, final mAP50 {r.results[MAP50][-1]:.3f} "
                  f"({done[0]}/{len(todo)})", flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(one, r) for r in todo]
        try:
            for f in as_completed(futures):
                f.result()
        except BaseException:
            stop.set()
            for f in futures:
                f.cancel()
            for p in list(live):
                p.terminate()
            raise
    for r in runs:
        if r.results is None:
            r.load()


def stats(values):
    """(mean, sample sd (0 for one value), min, max)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.fmean(values), sd, min(values), max(values)


def first_pass(curve, threshold):
    return next((i + 1 for i, v in enumerate(curve) if v >= threshold), None)


def curves(runs_by_trainer, epochs):
    """{trainer: {metric: [(mean, sd, min, max) per epoch]}} over the seeds."""
    return {t: {m: [stats([r.results[m][e] for r in rs]) for e in range(epochs)]
                for m, _ in METRICS} for t, rs in runs_by_trainer.items()}


def write_csv(path, curve, epochs):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["epoch", "trainer", "metric", "mean", "sd", "min", "max"])
        for e in range(epochs):
            for t, per_metric in curve.items():
                for m, _ in METRICS:
                    w.writerow([e + 1, t, m] + [f"{v:.5g}" for v in per_metric[m][e]])


def summary(args, title, runs_by_trainer, curve, epochs):
    """The markdown summary for one run length."""
    th = args.threshold
    lines = [f"# {title}", "",
             f"| trainer | seeds | final mAP50 mean ± sd [min–max] | final mAP50-95 mean ± sd | "
             f"best mAP50 mean | first epoch mAP50 ≥ {th:g} (per seed; median) | "
             "wall s/run mean [min–max] |", "|---|---|---|---|---|---|---|"]
    for t, rs in runs_by_trainer.items():
        m50, sd50, lo50, hi50 = curve[t][MAP50][-1]
        m, sd, _, _ = curve[t][MAP][-1]
        best = statistics.fmean(max(r.results[MAP50][:epochs]) for r in rs)
        firsts = [first_pass(r.results[MAP50][:epochs], th) for r in rs]
        med = statistics.median([f if f else math.inf for f in firsts])
        walls = [r.wall for r in rs if not math.isnan(r.wall)]
        wall = (f"{statistics.fmean(walls):.1f} [{min(walls):.1f}–{max(walls):.1f}]" if walls
                else "-")
        lines.append(f"| {LABELS[t]} | {len(rs)} | {m50:.3f} ± {sd50:.3f} [{lo50:.3f}–{hi50:.3f}] "
                     f"| {m:.3f} ± {sd:.3f} | {best:.3f} | "
                     f"{', '.join(str(f) if f else '-' for f in firsts)}; "
                     f"{'-' if math.isinf(med) else f'{med:g}'} | {wall} |")
    if "ours" in curve and "yolov5" in curve:
        diff = curve["ours"][MAP50][-1][0] - curve["yolov5"][MAP50][-1][0]
        spread = max(curve["ours"][MAP50][-1][1], curve["yolov5"][MAP50][-1][1])
        verdict = ("within the spread" if abs(diff) <= spread else
                   f"outside the spread ({'ours' if diff > 0 else 'YOLOv5'} ahead)")
        lines += ["", f"ours - YOLOv5 = {diff:+.3f} mAP50 at epoch {epochs}; the spread (max of "
                  f"the two sds) is {spread:.3f}: {verdict}."]
    heads = [f"{LABELS[t]} {n}" for n in ("mAP50", "mAP50-95") for t in curve]
    lines += ["", "mAP per epoch, mean ± sd over the seeds:", "",
              "| epoch | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for e in range(epochs):
        cells = [f"{curve[t][m][e][0]:.3f} ± {curve[t][m][e][1]:.3f}" for m in (MAP50, MAP)
                 for t in curve]
        lines.append(f"| {e + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(path, title, curve, epochs, threshold):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 4, figsize=(16, 7), tight_layout=True)
    x = range(1, epochs + 1)
    for ax, (m, name) in zip(axes.flat, [METRICS[i] for i in GRID]):
        for i, (t, per_metric) in enumerate(curve.items()):
            mean, _, lo, hi = zip(*per_metric[m])
            ax.plot(x, mean, color=f"C{i}", label=LABELS[t])
            ax.fill_between(x, lo, hi, color=f"C{i}", alpha=0.2, linewidth=0)
        if m == MAP50:
            ax.axhline(threshold, color="grey", linestyle="--", linewidth=1,
                       label=f"threshold {threshold:g}")
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{title} (mean, min–max band)")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    args = parse_args()
    args.hyp_path = Path(args.hyp) if Path(args.hyp).is_file() else ROOT / "hyp" / args.hyp
    if not args.hyp_path.is_file():
        raise SystemExit(f"{PROG}: --hyp {args.hyp}: no such file (here or in {ROOT / 'hyp'})")
    args.hyp_path = args.hyp_path.resolve()
    out = Path(args.out).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(yolov5_env(out))
    data = dataset(args, env, out)
    desc, root, splits, names = data
    sizes = {k: len(image_files(root / rel, args.max_images)) for k, rel in splits.items()}
    runs = [Run(t, e, s, out) for e in args.lengths for s in range(args.seeds)
            for t in args.trainers]  # interleaved, so drift hits both trainers
    version = importlib.metadata.version("yolov5")
    print(f"data: {desc}, {sizes['train']} train + {sizes['val']} val images; {args.cfg}, "
          f"{args.imgsz} px, batch {args.batch}, {args.hyp_path.name}, {args.optimizer}; "
          f"{len(runs)} run{'s' * (len(runs) != 1)}, "
          f"{args.jobs} at a time with OMP_NUM_THREADS={args.threads}; logs in {out / 'logs'}",
          flush=True)
    execute(runs, args, data, env, out)

    for e in args.lengths:
        by_trainer = {t: [r for r in runs if r.trainer == t and r.epochs == e]
                      for t in args.trainers}
        curve = curves(by_trainer, e)
        title = (f"ours vs YOLOv5 {version}: {desc} ({sizes['train']} train + {sizes['val']} val "
                 f"images), {args.cfg}, {args.imgsz} px, batch {args.batch}, "
                 f"{args.hyp_path.name}, {args.optimizer}, {e} epochs, seeds "
                 f"0-{args.seeds - 1}")
        write_csv(out / f"curves_e{e}.csv", curve, e)
        plot(out / f"curves_e{e}.png", title, curve, e, args.threshold)
        text = summary(args, title, by_trainer, curve, e)
        (out / f"summary_e{e}.md").write_text(text, encoding="utf-8")
        print("\n" + text + f"\n(curves: {out}/curves_e{e}.csv, .png)", flush=True)


if __name__ == "__main__":
    main()

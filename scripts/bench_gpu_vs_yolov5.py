#!/usr/bin/env python3
"""Helpers of scripts/bench_gpu_vs_yolov5.sh (standard library only, so any Python runs them):

  data SRC DST --copies N [--images N] [--names-from YAML]
      a YOLO dataset in DST: SRC's first N images (and labels) copied N times under distinct names
      into images/train, the originals into images/val, and DST.yaml describing it.
  run --log LOG [--smi CSV --gpu I] [--timeout S] -- CMD...
      runs CMD with its output (stdout and stderr, split at newlines and carriage returns) written
      to LOG, each line prefixed with the seconds since the start at which it arrived; with --smi,
      nvidia-smi samples GPU I's utilisation and memory every 200 ms into CSV on the same clock.
  yolov5 ARGS...
      YOLOv5's train.py with ARGS, printing after each epoch's training loop the line our trainer
      prints ("N images in S s (R img/s)") so both logs read alike.
  table --model M --ours LOG[,CSV] --yolov5 LOG[,CSV] [--ddp LOG[,CSV] --ddp-label TEXT] ...
      one model's markdown section, appended to --out and printed.
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}


# ---- data -----------------------------------------------------------------------------------------
def link_or_copy(src, dst):
    try:
        os.link(src, dst)  # the images are only read: a hard link saves the copy
    except OSError:
        shutil.copyfile(src, dst)


def cmd_data(a):
    src = Path(a.src)
    split = next((s for s in ("train2017", "train") if (src / "images" / s).is_dir()), None)
    if split is None:
        sys.exit(f"bench_gpu_vs_yolov5: --data: no images/train2017 or images/train under {src}")
    images = sorted(p for p in (src / "images" / split).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if a.images:
        images = images[: a.images]
    if not images:
        sys.exit(f"bench_gpu_vs_yolov5: --data: no images in {src / 'images' / split}")
    dst = Path(a.dst)
    if dst.exists():
        shutil.rmtree(dst)  # label caches of an earlier run go too
    for sub in ("images/train", "images/val", "labels/train", "labels/val"):
        (dst / sub).mkdir(parents=True)
    for img in images:
        label = src / "labels" / split / (img.stem + ".txt")
        for k in range(a.copies):
            link_or_copy(img, dst / "images/train" / f"c{k}_{img.name}")
            if label.exists():
                link_or_copy(label, dst / "labels/train" / f"c{k}_{img.stem}.txt")
        link_or_copy(img, dst / "images/val" / img.name)
        if label.exists():
            link_or_copy(label, dst / "labels/val" / label.name)
    names = "names: [circle, rectangle, triangle]\n"
    if a.names_from:  # the names block of a dataset YAML (coco128.yaml's 80 classes)
        text = Path(a.names_from).read_text()
        m = re.search(r"^names:.*?(?=^\S|\Z)", text, re.S | re.M)
        names = m.group(0) if m else names
    yaml = dst.parent / (dst.name + ".yaml")
    yaml.write_text(f"path: {dst}\ntrain: images/train\nval: images/val\n{names}")
    print(f"{len(images) * a.copies} train images ({len(images)} x {a.copies}), {len(images)} val")


# ---- run --------------------------------------------------------------------------------------------
def sample_gpu(gpu, csv_path, t0, stop):
    """nvidia-smi's own loop (-lms) until stop is set; 't,utilization %,memory MiB' rows."""
    proc = subprocess.Popen(
        ["nvidia-smi", "-i", str(gpu), "--query-gpu=utilization.gpu,memory.used",
         "--format=csv,noheader,nounits", "-lms", "200"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    with open(csv_path, "w") as out:
        out.write("t,util,mem\n")

        def read():
            for line in proc.stdout:
                parts = [x.strip() for x in line.split(",")]
                if len(parts) == 2 and all(x.replace(".", "", 1).isdigit() for x in parts):
                    out.write(f"{time.monotonic() - t0:.3f},{parts[0]},{parts[1]}\n")
                    out.flush()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        stop.wait()
        proc.terminate()
        proc.wait()
        reader.join(2)


def cmd_run(a):
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    t0 = time.monotonic()
    stop = threading.Event()
    sampler = None
    if a.smi:
        sampler = threading.Thread(target=sample_gpu, args=(a.gpu, a.smi, t0, stop))
        sampler.start()
    # Its own session, so a timeout or Ctrl-C ends the whole tree (loader workers, torchrun ranks).
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    timer = threading.Timer(a.timeout, lambda: os.killpg(proc.pid, signal.SIGKILL)) if a.timeout else None
    if timer:
        timer.start()
    rc = None
    try:
        with open(a.log, "w", errors="replace") as log:
            pending = b""
            while True:
                chunk = os.read(proc.stdout.fileno(), 65536)
                now = time.monotonic() - t0
                if not chunk:
                    break
                parts = re.split(rb"[\r\n]", pending + chunk)
                pending = parts.pop()
                for p in parts:
                    if p.strip():
                        log.write(f"{now:.3f} {p.decode(errors='replace')}\n")
                log.flush()
            if pending.strip():
                log.write(f"{time.monotonic() - t0:.3f} {pending.decode(errors='replace')}\n")
        rc = proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = 130
    finally:
        if timer:
            timer.cancel()
        stop.set()
        if sampler:
            sampler.join()
    if rc != 0:
        why = f"killed after {a.timeout} s (--timeout)" if rc == -signal.SIGKILL and a.timeout else f"exit {rc}"
        tail = "".join(Path(a.log).read_text(errors="replace").splitlines(True)[-15:])
        sys.stderr.write(f"bench_gpu_vs_yolov5: {' '.join(cmd)}: {why}; end of {a.log}:\n{tail}")
    return 0 if rc == 0 else 1


# ---- yolov5 -----------------------------------------------------------------------------------------
def cmd_yolov5(argv):
    from yolov5 import train as yolo_train
    from yolov5.utils.callbacks import Callbacks

    # YOLOv5 uses AMP on CUDA when its check passes; when a randomly initialised model fails the
    # check it fetches yolov5n.pt to try again. AMP on CUDA, as ours, and never a download.
    yolo_train.check_amp = lambda model: next(model.parameters()).device.type == "cuda"
    state = {"t": 0.0, "n": 0}
    cb = Callbacks()

    def epoch_start():
        state.update(t=time.monotonic(), n=0)

    def batch_end(model, ni, imgs, *rest):
        state["n"] += int(imgs.shape[0])

    def epoch_end(epoch=None):
        s = time.monotonic() - state["t"]
        print(f"  {state['n']} images in {s:.2f} s ({state['n'] / max(s, 1e-9):.1f} img/s)", flush=True)

    cb.register_action("on_train_epoch_start", callback=epoch_start)
    cb.register_action("on_train_batch_end", callback=batch_end)
    cb.register_action("on_train_epoch_end", callback=epoch_end)
    sys.argv = ["yolov5.train"] + argv
    yolo_train.main(yolo_train.parse_opt(), callbacks=cb)
    return 0


# ---- table ------------------------------------------------------------------------------------------
ALL_ROW = re.compile(r"^\s*all\s+\d+\s+\d+(\s+[-+.\deE]+){4}\s*$")
EPOCH_LINE = re.compile(r"(\d+) images in ([\d.]+) s \(([\d.]+) img/s\)")
GPU_MEM = re.compile(r"^\s*\d+/\d+\s+([\d.]+)G\s")
PREFIX = re.compile(r"^\[(default|rank)\d+\]:")  # torchrun's --tee prefix


def read_log(path):
    rows = []
    for line in Path(path).read_text(errors="replace").splitlines():
        t, _, text = line.partition(" ")
        try:
            rows.append((float(t), PREFIX.sub("", text)))
        except ValueError:
            pass
    return rows


def summarize(spec):
    """Figures of one run from its timestamped log (and nvidia-smi CSV, if any)."""
    log, _, smi = spec.partition(",")
    rows = read_log(log)
    epochs = [(t, int(m[1]), float(m[2]), float(m[3])) for t, x in rows if (m := EPOCH_LINE.search(x))]
    alls = [t for t, x in rows if ALL_ROW.match(x)]
    # Epoch k ends with the first validation after its training loop.
    val_end = []
    for t, *_ in epochs:
        val_end.append(next((v for v in alls if v >= t), None))
    n = len(epochs)
    if n < 2 or None in val_end:
        sys.exit(f"bench_gpu_vs_yolov5: {log}: found {n} epochs and {len(alls)} validations; need at "
                 "least 2 epochs each validated")
    later = range(1, n)  # the first epoch pays cuDNN autotuning and warm caches
    s = {
        "epochs": n,
        "steady": (val_end[-1] - val_end[0]) / (n - 1),
        "ips": statistics.median(epochs[k][3] for k in later),
        "val": statistics.median(val_end[k] - epochs[k][0] for k in later),
        "images": epochs[-1][1],
        "gpu_mem": max((float(m[1]) for _, x in rows if (m := GPU_MEM.match(x))), default=None),
        "busy": None,
        "peak": None,
    }
    if smi and Path(smi).is_file():
        samples = []
        for line in Path(smi).read_text().splitlines()[1:]:
            t, util, mem = (float(v) for v in line.split(","))
            samples.append((t, util, mem))
        window = [u for t, u, _ in samples if val_end[0] <= t <= val_end[-1]]
        s["busy"] = statistics.mean(window) if window else None
        s["peak"] = max((m for *_, m in samples), default=None)
    return s


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def figure_rows(ours, theirs, later):
    """The table rows both side-by-side benches print: figure | ours | theirs | ratio."""
    rows = []
    for label, key, spec in [
        (f"steady epoch, s ({later}: training, validation, checkpoint)", "steady", ".2f"),
        (f"in-loop images/s ({later}, median)", "ips", ".1f"),
        (f"validation, s ({later}, median)", "val", ".2f"),
        (f"GPU busy, % ({later}, mean)", "busy", ".1f"),
        ("peak GPU memory, MiB (nvidia-smi)", "peak", ".0f"),
        ("peak GPU_mem column, GB (reserved by the caching allocator)", "gpu_mem", ".3g"),
    ]:
        rows.append(f"| {label} | {fmt(ours[key], spec)} | {fmt(theirs[key], spec)} | "
                    f"{ratio(ours[key], theirs[key])} |")
    return rows


def cmd_table(a):
    ours, y5 = summarize(a.ours), summarize(a.yolov5)
    if a.cpu:  # the GPU_mem column reads 0G on the CPU
        ours["gpu_mem"] = y5["gpu_mem"] = None
    n = ours["epochs"]
    later = "epoch 2" if n == 2 else f"epochs 2-{n}"
    lines = [f"### {a.model}: {a.setting}", "",
             "| figure | ours | YOLOv5 | ours / YOLOv5 |", "|---|---|---|---|"]
    lines += figure_rows(ours, y5, later)
    lines.append("")
    if a.ddp:
        d = summarize(a.ddp)
        r = d["ips"] / ours["ips"]
        lines.append(f"ours under {a.ddp_label}: in-loop {d['ips']:.1f} images/s against "
                     f"{ours['ips']:.1f} in the plain run: ratio {r:.2f} (within 5 %: "
                     f"{'yes' if r >= 0.95 else 'no'}); steady epoch {d['steady']:.2f} s")
        lines.append("")
    text = "\n".join(lines) + "\n"
    with open(a.out, "a") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "yolov5":  # YOLOv5's own argparse takes the rest
        return cmd_yolov5(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd_name", required=True)
    d = sub.add_parser("data")
    d.add_argument("src")
    d.add_argument("dst")
    d.add_argument("--copies", type=int, default=10)
    d.add_argument("--images", type=int, default=0, help="use the first N images (0: all)")
    d.add_argument("--names-from")
    r = sub.add_parser("run")
    r.add_argument("--log", required=True)
    r.add_argument("--smi")
    r.add_argument("--gpu", default="0")
    r.add_argument("--timeout", type=float, default=0)
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    t = sub.add_parser("table")
    t.add_argument("--model", required=True)
    t.add_argument("--setting", default="")
    t.add_argument("--ours", required=True)
    t.add_argument("--yolov5", required=True)
    t.add_argument("--ddp")
    t.add_argument("--ddp-label", default="torchrun --nproc_per_node=1")
    t.add_argument("--out", required=True)
    t.add_argument("--cpu", action="store_true", help="GPU rows n/a")
    a = ap.parse_args()
    return {"data": cmd_data, "run": cmd_run, "table": cmd_table}[a.cmd_name](a) or 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Mosaic training batches per second from YOLOv5 v7.0's LoadImagesAndLabels beside ours
(`bench_data --images`) on the same JPEG files in the same run, and the ratios ours/YOLOv5.

The data: a copy of a YOLO dataset folder (default ../shared/datasets/coco128 when it is there)
or generated JPEGs, made by bench_data under OUT/data. YOLOv5 reads the same image files through
a list file, so its label cache (OUT/yolov5_images.cache) never meets ours (labels/<split>.cache).

Per cache mode, ours (bench_data, all worker counts) runs first, then YOLOv5: in process (one core:
__getitem__ and collate_fn on the main thread) and through its InfiniteDataLoader with each worker
count. Every YOLOv5 figure comes from a forked child, so each has its own peak RSS. Every process
keeps one intra-op thread and OpenCV single-threaded (as YOLOv5 sets), so N workers use N cores.
Albumentations is not installed in the test venv, so YOLOv5's 1 % blur/grey/CLAHE are skipped, as
ours has none.

Run it through scripts/bench_data_vs_yolov5.sh, which finds the venv and sets the thread caps."""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy and torch start their pools

IMG_SUFFIXES = {".bmp", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp"}
OURS_LINE = re.compile(
    r"cache (?P<cache>\w+) +workers (?P<workers>\d+) \(used (?P<used>\d+)\): "
    r"dataset (?P<construct_s>[\d.]+) s, RSS (?P<construct_rss_mib>[-+\d.]+) MiB \| "
    r"first batch (?P<first_s>[\d.]+) s \| (?P<images>\d+) images in (?P<seconds>[\d.]+) s: "
    r"(?P<ips>[\d.]+) images/s, (?P<per_worker>[\d.]+) per worker \| "
    r"peak RSS (?P<peak_rss_mib>[-+\d.]+) MiB \| cache (?P<cache_mib>[\d.]+) MiB, "
    r"(?P<cache_b_per_image>[\d.]+) B/image \((?P<cached_images>\d+) images")


def positive_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas, got '{text}'")
    return values


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = ROOT.parent / "shared/datasets/coco128"
    ap.add_argument("--data", default=str(shared) if shared.is_dir() else "generate",
                    help="a YOLO dataset folder (copied first) or 'generate' "
                    "(default: %(default)s)")
    ap.add_argument("--bench-data", default=str(ROOT / "build/bin/bench_data"))
    ap.add_argument("--out", default=str(ROOT / "runs/bench_data_vs_yolov5"))
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=8, help="timed batches after the first")
    ap.add_argument("--workers", type=positive_list, default=[1, 2])
    ap.add_argument("--count", type=int, default=128,
                    help="generated images (with --data generate)")
    ap.add_argument("--width", type=int, default=640, help="generated images' width")
    ap.add_argument("--hyp", default=str(ROOT / "hyp/hyp.scratch-low.yaml"))
    args = ap.parse_args()
    if args.imgsz < 32 or args.imgsz % 32:
        ap.error(f"--imgsz: must be a positive multiple of 32, got {args.imgsz}")
    for flag in ("batch", "batches", "count"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag}: must be at least 1, got {getattr(args, flag)}")
    if args.width < 160:
        ap.error(f"--width: must be at least 160 (pixels), got {args.width}")
    if not Path(args.bench_data).is_file():
        ap.error(f"--bench-data: {args.bench_data} does not exist; build it "
                 "(cmake --build build --target bench_data)")
    if args.data != "generate" and not Path(args.data).is_dir():
        ap.error(f"--data: expected a dataset folder or 'generate', got '{args.data}'")
    if not Path(args.hyp).is_file():
        ap.error(f"--hyp: {args.hyp} does not exist")
    return args


def run_ours(args, extra):
    cmd = [args.bench_data, "--root", str(Path(args.out) / "data"), "--images", args.data,
           "--images-count", str(args.count), "--images-width", str(args.width),
           "--loader-imgsz", str(args.imgsz), "--images-batch", str(args.batch)] + extra
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise SystemExit(
            f"bench_data_yolov5: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}")
    return proc.stdout


# --- YOLOv5's side: each figure in a forked child ---------------------------------------------

def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # the peak then starts at the parent's, about its start-up RSS


def in_child(fn, log_path):
    """fn() in a forked child (stderr to log_path); its dict result, or SystemExit on failure."""
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        try:
            result = fn()
        except BaseException as e:  # noqa: BLE001 - reported by the parent
            result = {"error": f"{type(e).__name__}: {e}"}
        with os.fdopen(w, "w") as out:
            out.write(json.dumps(result))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        raise SystemExit(f"bench_data_yolov5: the measuring child ended without a result "
                         f"(status {status}); see {log_path}")
    result = json.loads(text)
    if "error" in result:
        raise SystemExit(f"bench_data_yolov5: YOLOv5 failed: {result['error']} (log: {log_path})")
    return result


def yolov5_dataset(list_file, args, hyp, cache):
    from yolov5.utils.dataloaders import LoadImagesAndLabels
    return LoadImagesAndLabels(str(list_file), img_size=args.imgsz, batch_size=args.batch,
                               augment=True, hyp=hyp,
                               cache_images=cache if cache in ("ram", "disk") else False,
                               prefix="")


def measure_yolov5(list_file, args, hyp, cache, workers):
    """workers 0: in process (__getitem__ + collate_fn on this thread); else InfiniteDataLoader."""
    import random

    import cv2
    import numpy as np
    import torch
    from yolov5.utils.dataloaders import InfiniteDataLoader, LoadImagesAndLabels, seed_worker

    torch.set_num_threads(1)
    cv2.setNumThreads(0)
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    reset_peak_rss()
    rss0 = status_kib("VmRSS")
    t = time.perf_counter()
    ds = yolov5_dataset(list_file, args, hyp, cache)
    res = {"construct_s": time.perf_counter() - t,
           "construct_rss_mib": (status_kib("VmRSS") - rss0) / 1024}
    collate = LoadImagesAndLabels.collate_fn

    if workers == 0:
        def batches():
            while True:  # epochs of shuffled indices, the last batch of each possibly short
                perm = torch.randperm(len(ds)).tolist()
                for i in range(0, len(perm), args.batch):
                    yield collate([ds[j] for j in perm[i:i + args.batch]])
        t = time.perf_counter()
        it = batches()
    else:
        def batches():
            g = torch.Generator()
            g.manual_seed(0)
            loader = InfiniteDataLoader(ds, batch_size=args.batch, shuffle=True,
                                        num_workers=workers, pin_memory=False, collate_fn=collate,
                                        worker_init_fn=seed_worker, generator=g)
            while True:
                yield from loader
        t = time.perf_counter()  # the loader starts its worker processes when made
        it = batches()
    next(it)
    res["first_s"] = time.perf_counter() - t
    images = 0
    t = time.perf_counter()
    for _ in range(args.batches):
        images += next(it)[0].shape[0]
    res["seconds"] = time.perf_counter() - t
    res["peak_rss_mib"] = (status_kib("VmHWM") - rss0) / 1024
    cached = [im for im in ds.ims if im is not None]
    res.update(images=images, used=max(workers, 1), cached_images=len(cached),
               cache_mib=sum(im.nbytes for im in cached) / 2**20)
    if cache == "disk":  # its .npy files
        npy = [f for f in ds.npy_files if f.exists()]
        res.update(cached_images=len(npy), cache_mib=sum(f.stat().st_size for f in npy) / 2**20)
    res["cache_b_per_image"] = res["cache_mib"] * 2**20 / max(len(cached), 1)
    res["ips"] = images / max(res["seconds"], 1e-9)
    res["per_worker"] = res["ips"] / res["used"]
    return res


def yolov5_line(cache, workers, r):
    where = "in process" if workers == 0 else f"DataLoader {plural(workers, 'worker')}"
    return (f"  [yolov5] cache {cache:<4} {where}: dataset {r['construct_s']:.3f} s, RSS "
            f"{r['construct_rss_mib']:+.1f} MiB | first batch {r['first_s']:.3f} s | "
            f"{r['images']} images in {r['seconds']:.2f} s: {r['ips']:.1f} images/s, "
            f"{r['per_worker']:.1f} per worker | peak RSS {r['peak_rss_mib']:+.1f} MiB (main "
            f"process) | cache {r['cache_mib']:.1f} MiB, {r['cache_b_per_image']:.0f} B/image "
            f"({r['cached_images']} images)")


def plural(n, word):
    return f"{n} {word}{'s' if n != 1 else ''}"


# --- the table -------------------------------------------------------------------------------

def ratio_row(name, ours, theirs, target=None, higher_is_better=True, fmt="{:.1f}"):
    ratio = ours / theirs if theirs else float("nan")
    verdict = ""
    if target is not None:
        met = ratio >= target if higher_is_better else ratio <= target
        verdict = f"{'>=' if higher_is_better else '<='} {target:g}: {'met' if met else 'NOT met'}"
    return f"| {name} | {fmt.format(ours)} | {fmt.format(theirs)} | {ratio:.2f} | {verdict} |"


def table(args, data_line, ours, y5, load):
    """ours[(cache, workers)], y5[(cache, workers)] (workers 0: in process) -> markdown lines."""
    w1 = min(args.workers)
    o_none, o_bounded, o_ram, o_disk = (ours[(c, w1)] for c in ("none", "bounded", "ram", "disk"))
    y_none, y_ram, y_disk = y5[("none", 0)], y5[("ram", 0)], y5[("disk", 0)]
    lines = [
        f"bench_data vs YOLOv5 LoadImagesAndLabels: mosaic (hyp.scratch-low), {args.imgsz} px, "
        f"batch {args.batch}, {args.batches} timed batches after the first; {data_line}",
        f"{os.cpu_count()} CPUs; load average {load[0]:.2f} at the start, {load[1]:.2f} at the "
        "end; one intra-op thread and OpenCV single-threaded in every process",
        "",
        "| figure | ours | YOLOv5 | ours/YOLOv5 | target |",
        "|---|---|---|---|---|",
        ratio_row(f"images/s per core, no cache (ours {plural(w1, 'worker')}; YOLOv5 in process)",
                  o_none["per_worker"], y_none["per_worker"], 1.5),
        ratio_row("images/s per core, ours default (bounded cache) vs YOLOv5 default (no cache)",
                  o_bounded["per_worker"], y_none["per_worker"], 1.5),
        ratio_row("images/s per core, --cache ram both", o_ram["per_worker"], y_ram["per_worker"],
                  3),
        ratio_row("images/s per core, ours --cache ram vs YOLOv5 no cache", o_ram["per_worker"],
                  y_none["per_worker"]),
    ]
    for w in args.workers:
        for mine, theirs in (("none", "none"), ("bounded", "none"), ("ram", "ram"),
                             ("disk", "disk")):
            lines.append(ratio_row(
                f"images/s total, {plural(w, 'worker')} (ours threads, YOLOv5 DataLoader "
                f"processes), ours {mine} vs YOLOv5 {theirs}",
                ours[(mine, w)]["ips"], y5[(theirs, w)]["ips"]))
    per_image = lambda r: r["construct_rss_mib"] * 1024 / max(r["cached_images"], 1)  # noqa: E731
    lines += [
        ratio_row(f"first batch s (lower is better), no cache, ours {plural(w1, 'worker')} vs "
                  "YOLOv5 in process", o_none["first_s"], y_none["first_s"], fmt="{:.2f}"),
        ratio_row("--cache ram: dataset construction s (fills the cache)", o_ram["construct_s"],
                  y_ram["construct_s"], fmt="{:.2f}"),
        ratio_row("--cache ram: cache bytes per image (KiB)", o_ram["cache_b_per_image"] / 1024,
                  y_ram["cache_b_per_image"] / 1024, 1, higher_is_better=False),
        ratio_row("--cache ram: RSS growth of the construction per image (KiB)",
                  per_image(o_ram), per_image(y_ram), 1, higher_is_better=False),
        ratio_row("images/s per core, --cache disk both", o_disk["per_worker"],
                  y_disk["per_worker"]),
        ratio_row("--cache disk: dataset construction s (writes the files)", o_disk["construct_s"],
                  y_disk["construct_s"], fmt="{:.2f}"),
        ratio_row(f"--cache disk: bytes on disk, MiB (ours: {o_disk['cached_images']:.0f} images "
                  f"resized as PNG; YOLOv5: {y_disk['cached_images']:.0f} full-size .npy)",
                  o_disk["cache_mib"], y_disk["cache_mib"], 1, higher_is_better=False),
    ]
    return lines


def main():
    args = parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    # YOLOv5 offline, its settings file kept under OUT.
    (out / "yolov5_config").mkdir(exist_ok=True)
    os.environ.update(YOLOV5_CONFIG_DIR=str(out / "yolov5_config"), YOLO_AUTOINSTALL="false",
                      YOLO_OFFLINE="true")
    import yaml
    import yolov5.utils.dataloaders  # noqa: F401 - once, before the children fork

    load = [os.getloadavg()[0]]
    prep = run_ours(args, ["--images-batches", "0"])
    print(prep, end="")
    m = re.search(r"^images: (\S+) \((.*)\)$", prep, re.M)
    if not m:
        raise SystemExit(f"bench_data_yolov5: no 'images:' line in bench_data's output:\n{prep}")
    folder = Path(m.group(1))
    files = sorted(str(p) for p in (folder / "images").rglob("*")
                   if p.suffix.lower() in IMG_SUFFIXES)
    list_file = out / "yolov5_images.txt"
    list_file.write_text("\n".join(files) + "\n")
    hyp = yaml.safe_load(Path(args.hyp).read_text())
    log = out / "yolov5.log"
    log.write_text("")
    t = time.perf_counter()
    in_child(lambda: {"n": len(yolov5_dataset(list_file, args, hyp, "none"))}, log)
    print(f"  YOLOv5: {len(files)} images listed in {list_file}; labels checked in "
          f"{time.perf_counter() - t:.2f} s (its label cache; not part of the figures)")

    ours, y5 = {}, {}
    workers = ",".join(map(str, args.workers))
    for ours_caches, theirs in (("none,bounded", "none"), ("ram", "ram"), ("disk", "disk")):
        if theirs == "disk":  # both write their files in the first construction
            for f in (folder / "images").rglob("*"):
                if f.suffix in (".cache", ".npy"):
                    f.unlink()
        text = run_ours(args, ["--images-caches", ours_caches, "--loader-workers", workers,
                               "--images-batches", str(args.batches)])
        for line in text.splitlines():
            hit = OURS_LINE.search(line)
            if hit:
                print("  [ours]  " + line.strip())
                r = {k: (v if k == "cache" else float(v)) for k, v in hit.groupdict().items()}
                ours[(r["cache"], int(r["workers"]))] = r
        for w in [0] + args.workers:
            r = in_child(lambda: measure_yolov5(list_file, args, hyp, theirs, w), log)
            print(yolov5_line(theirs, w, r), flush=True)
            if theirs == "ram" and r["cached_images"] == 0:
                print("  [yolov5] warning: YOLOv5 refused --cache ram (check_cache_ram: not enough "
                      "memory); its ram figures are without a cache")
            y5[(theirs, w)] = r
    missing = [f"{c} workers {w}" for c in ("none", "bounded", "ram", "disk") for w in args.workers
               if (c, w) not in ours]
    if missing:
        raise SystemExit(f"bench_data_yolov5: no figures from bench_data for {', '.join(missing)}")
    load.append(os.getloadavg()[0])
    source = ("generated" if args.data == "generate"
              else f"a copy of {Path(args.data).resolve()}")
    lines = table(args, f"{len(files)} images, {source}, in {folder}", ours, y5, load)
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
    print(f"\n(table also in {out / 'table.md'}; YOLOv5's messages in {log})")


if __name__ == "__main__":
    main()

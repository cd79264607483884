"""Our train and detect against YOLOv5 7.0's train.py and detect.py on a busy machine: each idle,
beside 1 and 2 busy single-thread processes, and inside a CPU quota of 1 core, side by side in one
run; prints a markdown table of wall times and each one's ratio to its idle time (run through
scripts/bench_busy.sh).

Train: yolov5n from its YAML on the built-in shapes data (300 train, 100 val images), 128 px,
batch 16, one epoch with its validation. Detect: the 100 val images at 256 px, --nosave, each
with the weights its own idle run trained. "ours, fixed threads" is ours with YOLO_FIXED_THREADS=1
(every core all the time, as before the thread count followed the load); in the quota, "ours, by
hand" is ours with OMP_NUM_THREADS=1 and --workers 0.

The quota is a cgroup made for the run (v2 cpu.max or v1 cpu.cfs_quota_us, 100 ms per 100 ms),
or, where cgroups are not writable, `taskset -c 0` (one core by affinity, said in the table)."""
import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from yolov5_side import ROOT, run, shapes_copy, shapes_data, yolov5_env  # noqa: E402

PROG = "bench_busy"


def make_quota(name):
    """A cgroup of 1 CPU for this run: (kind, directory) or (None, None) where none can be made."""
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").is_file():
        d = v2 / name
        try:
            d.mkdir(exist_ok=True)
            (d / "cpu.max").write_text("100000 100000\n")
            return "cgroup v2 cpu.max", d
        except OSError:
            shutil.rmtree(d, ignore_errors=True)
    for base in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct")):
        if (base / "cpu.cfs_quota_us").is_file():
            d = base / name
            try:
                d.mkdir(exist_ok=True)
                (d / "cpu.cfs_period_us").write_text("100000\n")
                (d / "cpu.cfs_quota_us").write_text("100000\n")
                return "cgroup v1 cpu.cfs_quota_us", d
            except OSError:
                try:
                    d.rmdir()
                except OSError:
                    pass
    return None, None


def in_quota(cmd, quota_dir):
    """cmd run as a member of the quota's cgroup (the shell joins it, then execs cmd), or pinned
    to CPU 0 where there is none."""
    if quota_dir is None:
        return ["taskset", "-c", "0"] + cmd
    return ["sh", "-c", f'echo $$ > "{quota_dir}/cgroup.procs" && exec "$@"', "sh"] + cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", default=str(ROOT / "build/bin/train"))
    ap.add_argument("--detect", default=str(ROOT / "build/bin/detect"))
    ap.add_argument("--out", default=str(ROOT / "runs/bench_busy"))
    ap.add_argument("--conditions", default="idle,busy1,busy2,quota1")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "YOLO_FIXED_THREADS"):
        env.pop(k, None)
    env.update(yolov5_env(out))
    shapes = shapes_data(args.train, "yolov5n", env, out, PROG)
    ours_yaml = shapes_copy(shapes, out / "data_ours")
    y5_yaml = shapes_copy(shapes, out / "data_yolov5")
    val_ours, val_y5 = out / "data_ours/images/val", out / "data_yolov5/images/val"

    def train(who, name):
        if who == "YOLOv5":
            return [sys.executable, "-m", "yolov5.train", "--data", str(y5_yaml), "--cfg",
                    "yolov5n.yaml", "--weights", "", "--imgsz", "128", "--batch-size", "16",
                    "--epochs", "1", "--noplots", "--project", str(out / "runs"), "--name", name,
                    "--exist-ok"]
        return [args.train, "--data", str(ours_yaml), "--cfg", "yolov5n.yaml", "--imgsz", "128",
                "--batch-size", "16", "--epochs", "1", "--noplots", "--project",
                str(out / "runs"), "--name", name, "--exist-ok"]

    def detect(who, name):
        if who == "YOLOv5":
            return [sys.executable, "-m", "yolov5.detect", "--weights",
                    str(out / "runs/yolov5_train_idle/weights/best.pt"), "--source", str(val_y5),
                    "--imgsz", "256", "--nosave", "--project", str(out / "runs"), "--name", name,
                    "--exist-ok"]
        return [args.detect, "--weights", str(out / "runs/ours_train_idle/weights/best.pt"),
                "--source", str(val_ours), "--imgsz", "256", "--nosave", "--project",
                str(out / "runs"), "--name", name, "--exist-ok"]

    # (row label, run name prefix, who, extra environment, extra flags for train)
    rows = [("ours", "ours", "ours", {}, []),
            ("ours, fixed threads", "ours_fixed", "ours", {"YOLO_FIXED_THREADS": "1"}, []),
            ("YOLOv5 7.0", "yolov5", "YOLOv5", {}, [])]
    by_hand = ("ours, by hand (OMP_NUM_THREADS=1, --workers 0)", "ours_by_hand", "ours",
               {"OMP_NUM_THREADS": "1"}, ["--workers", "0"])
    conditions = [c.strip() for c in args.conditions.split(",")]
    quota_kind, quota_dir = (None, None)
    if "quota1" in conditions:
        quota_kind, quota_dir = make_quota(f"yolo_bench_busy_{os.getpid()}")
        quota_kind = quota_kind or "taskset -c 0 (no writable cgroup)"
    times = {}
    try:
        for cond in conditions:
            busy = []
            if cond.startswith("busy"):
                for _ in range(int(cond[4:])):
                    busy.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
                time.sleep(1)
            cond_rows = rows + ([by_hand] if cond == "quota1" else [])
            try:
                for label, key, who, extra, flags in cond_rows:
                    e = dict(env, **extra)
                    for task, make in (("train", train), ("detect", detect)):
                        name = f"{key}_{task}_{cond}"
                        cmd = make(who, name) + (flags if task == "train" else [])
                        if cond == "quota1":
                            cmd = in_quota(cmd, quota_dir)
                        wall, _ = run(cmd, e, out / f"{name}.log", PROG)
                        times[(label, task, cond)] = wall
                        print(f"  {label:<48} {task:<6} {cond:<6} {wall:7.1f} s", flush=True)
            finally:
                for p in busy:
                    p.kill()
                    p.wait()
    finally:
        if quota_dir is not None:
            try:
                quota_dir.rmdir()
            except OSError:
                pass

    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p' | head -1"],
                         capture_output=True, text=True).stdout.strip()
    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores ({cpu}); wall seconds of the "
          f"whole command (and its ratio to the same row idle); quota: {quota_kind or 'not run'}\n")
    labels = [r[0] for r in rows] + ([by_hand[0]] if "quota1" in conditions else [])
    head = {"idle": "idle", "busy1": "beside 1 busy", "busy2": "beside 2 busy",
            "quota1": "1-core quota"}
    print("| run | " + " | ".join(head.get(c, c) for c in conditions) + " |")
    print("|---|" + "---|" * len(conditions))
    for task in ("train", "detect"):
        for label in labels:
            idle = times.get((label, task, "idle"))
            cells = []
            for c in conditions:
                t = times.get((label, task, c))
                if t is None:
                    cells.append("")
                elif c == "idle" or not idle:
                    cells.append(f"{t:.1f}")
                else:
                    cells.append(f"{t:.1f} ({t / idle:.1f}x)")
            if any(cells):
                print(f"| {task}: {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

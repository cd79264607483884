#!/usr/bin/env python3
"""Helpers of scripts/bench_gpu_vs_ultralytics.sh; `data` and `run` are those of
scripts/bench_gpu_vs_yolov5.py (standard library only).

  ultralytics --data YAML --cfg M.yaml --imgsz N --batch N --epochs N --workers N --device D
              --project DIR --name NAME
      Ultralytics 8.4.190's YOLO(M.yaml).train with those settings (its defaults otherwise:
      optimizer auto, AMP on CUDA), printing after each epoch's training loop the line our trainer
      prints ("N images in S s (R img/s)") so both logs read alike.
  table --model M --ours LOG[,CSV] --ultralytics LOG[,CSV] --ours-csv RESULTS
        --ultralytics-csv RESULTS [--setting TEXT] [--cpu] --out FILE
      one model's markdown section (steady epoch, in-loop images/s, validation time, GPU busy %,
      peak GPU memory, and both sides' training losses at their last common epoch: box, cls and
      dfl, or l1 for YOLO26), appended to
      --out and printed.
"""
import argparse
import csv
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpu_vs_yolov5 as common  # noqa: E402  (its data, run and summarize)


def cmd_ultralytics(a):
    import ultralytics.engine.trainer as engine
    from ultralytics import YOLO

    # Its AMP check runs a downloaded yolo26n.pt; offline, AMP stays on CUDA as ours.
    engine.check_amp = lambda model: next(model.parameters()).device.type == "cuda"
    state = {"t": 0.0}

    def epoch_start(trainer):
        state["t"] = time.monotonic()

    def epoch_end(trainer):
        s = time.monotonic() - state["t"]
        n = len(trainer.train_loader.dataset)
        print(f"  {n} images in {s:.2f} s ({n / max(s, 1e-9):.1f} img/s)", flush=True)

    model = YOLO(a.cfg)
    model.add_callback("on_train_epoch_start", epoch_start)
    model.add_callback("on_train_epoch_end", epoch_end)
    model.train(data=a.data, imgsz=a.imgsz, batch=a.batch, epochs=a.epochs, workers=a.workers,
                device=a.device, project=a.project, name=a.name, exist_ok=True, plots=False,
                verbose=True)
    return 0


def losses(path):
    """Each epoch's training losses from a results.csv (ours pads its names), by name: box, cls,
    and dfl (YOLOv8, YOLO11) or l1 (YOLO26)."""
    with open(path) as f:
        rows = [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(f)]
    names = [k[len("train/"):-len("_loss")] for k in (rows[0] if rows else {})
             if k.startswith("train/") and k.endswith("_loss")]
    return names, [tuple(float(r[f"train/{n}_loss"]) for n in names) for r in rows]


def cmd_table(a):
    ours, ul = common.summarize(a.ours), common.summarize(a.ultralytics)
    if a.cpu:  # the GPU_mem column reads 0G on the CPU
        ours["gpu_mem"] = ul["gpu_mem"] = None
    n = ours["epochs"]
    later = "epoch 2" if n == 2 else f"epochs 2-{n}"
    lines = [f"### {a.model}: {a.setting}", "",
             "| figure | ours | Ultralytics | ours / Ultralytics |", "|---|---|---|---|"]
    lines += common.figure_rows(ours, ul, later)
    (names, lo), (theirs, lu) = losses(a.ours_csv), losses(a.ultralytics_csv)
    if names != theirs:
        sys.exit(f"bench_gpu_vs_ultralytics: {a.model}: loss columns differ: ours {names}, "
                 f"Ultralytics {theirs}")
    e = min(len(lo), len(lu))
    if e == 0:
        sys.exit(f"bench_gpu_vs_ultralytics: no epochs in {a.ours_csv} or {a.ultralytics_csv}")
    for i, name in enumerate(names):
        o, u = lo[e - 1][i], lu[e - 1][i]
        if not (math.isfinite(o) and math.isfinite(u)):
            sys.exit(f"bench_gpu_vs_ultralytics: {a.model}: epoch {e}'s {name} loss is not finite "
                     f"(ours {o}, Ultralytics {u})")
        lines.append(f"| train/{name}_loss, epoch {e} | {o:.4f} | {u:.4f} | {common.ratio(o, u)} |")
    lines.append("")
    text = "\n".join(lines) + "\n"
    with open(a.out, "a") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("data", "run"):
        return common.main()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd_name", required=True)
    u = sub.add_parser("ultralytics")
    for k in ("data", "cfg", "device", "project", "name"):
        u.add_argument(f"--{k}", required=True)
    for k in ("imgsz", "batch", "epochs", "workers"):
        u.add_argument(f"--{k}", type=int, required=True)
    t = sub.add_parser("table")
    t.add_argument("--model", required=True)
    t.add_argument("--setting", default="")
    t.add_argument("--ours", required=True)
    t.add_argument("--ultralytics", required=True)
    t.add_argument("--ours-csv", required=True)
    t.add_argument("--ultralytics-csv", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--cpu", action="store_true", help="GPU rows n/a")
    a = ap.parse_args()
    return {"ultralytics": cmd_ultralytics, "table": cmd_table}[a.cmd_name](a) or 0


if __name__ == "__main__":
    sys.exit(main())

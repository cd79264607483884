"""Usage: test_tensorboard.py RUN_DIR
The run's TensorBoard event files, read back with TensorBoard's own EventAccumulator, hold every
value of results.csv under YOLOv5's tags (train/*, metrics/*, val/*, x/lr0..2), one step per epoch.
"""
import csv
import glob
import math
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TAGS = ["train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision",
        "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss",
        "val/obj_loss", "val/cls_loss", "x/lr0", "x/lr1", "x/lr2"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    run = sys.argv[1]
    files = glob.glob(os.path.join(run, "events.out.tfevents.*"))
    if not files:
        fail(f"no events.out.tfevents.* in {run}")
    with open(os.path.join(run, "results.csv")) as f:
        rows = [{k.strip(): float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    if len(rows) < 2:
        fail(f"results.csv has {len(rows)} rows; the run should have several epochs")
    acc = EventAccumulator(run, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    if sorted(tags) != sorted(TAGS):
        fail(f"scalar tags {sorted(tags)} are not YOLOv5's {sorted(TAGS)}")
    checked = 0
    for tag in TAGS:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        want = [int(r["epoch"]) for r in rows]
        if steps != want:
            fail(f"{tag}: steps {steps} are not results.csv's epochs {want}")
        for e, r in zip(events, rows):
            # results.csv keeps 5 significant digits (relative error <= 5e-5), the event file a float32.
            if not math.isclose(e.value, r[tag], rel_tol=1e-4, abs_tol=1e-9):
                fail(f"{tag} at epoch {e.step}: TensorBoard {e.value!r}, results.csv {r[tag]!r}")
            checked += 1
    print(f"{len(files)} event file(s): {checked} values under {len(TAGS)} tags over {len(rows)} "
          "epochs equal results.csv")


if __name__ == "__main__":
    main()

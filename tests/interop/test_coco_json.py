"""Usage: test_coco_json.py BIN_DIR FIXTURE_DIR WORK_DIR
val --save-json writes COCO results that pycocotools scores, and val's own COCO evaluation agrees:
  1. the shared model's val set (file stems like val_00012: string image ids, class-index
     categories): scripts/yolo_to_coco.py writes the ground truth, val --save-json evaluates it;
     pycocotools' 12 numbers on the same JSON equal val's summary (printed to 3 decimals), and
     val's own mAP50-95 (YOLOv5's metric) is within 0.02 of COCO's.
  2. the same images as COCO names them (all-digit stems, a coco/val2017.txt list): image ids are
     numbers and categories COCO's 91-id numbering, as YOLOv5 writes them for COCO;
  3. one epoch of training on that data ends, as YOLOv5's, with best.pt scored by COCO's protocol.
"""
import json
import os
import re
import shutil
import sys

from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from interop_common import ROOT, fail, run


def write_yaml(path, root, val, names):
    with open(path, "w") as f:
        f.write(f"path: {root}\ntrain: {val}\nval: {val}\nnames: {json.dumps(names)}\n")


def val_json(bin_dir, weights, data, work, name):
    out = run([os.path.join(bin_dir, "val"), "--weights", weights, "--data", data, "--imgsz", "160",
               "--save-json", "--noplots", "--project", work, "--name", name, "--exist-ok"],
              os.path.join(work, name + ".log"))
    all_rows = [l for l in out.splitlines() if re.match(r"\s+all\s", l)]
    summary = [float(m) for m in re.findall(r"\] = (-?[0-9.]+)$", out, re.M)]
    if not all_rows or len(summary) != 12:
        print(out[-3000:])
        fail(f"val {name}: no 'all' row or no 12-line COCO summary in its output")
    return float(all_rows[-1].split()[-1]), summary, os.path.join(work, name, "best_predictions.json")


def pycoco(gt_path, dt_path):
    gt = COCO(gt_path)
    e = COCOeval(gt, gt.loadRes(dt_path), "bbox")
    e.evaluate()
    e.accumulate()
    e.summarize()
    return list(e.stats)


def compare(what, ours, theirs):
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if abs(a - b) > 0.0006:  # ours printed to 3 decimals
            fail(f"{what}: COCO stat {i}: val printed {a}, pycocotools {b:.5f}")


def main():
    bin_dir, fixture, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    weights = os.path.join(fixture, "runs", "exp", "weights", "best.pt")
    val_dir = os.path.join(fixture, "shapes", "images", "val")
    names = ["circle", "rectangle", "triangle"]

    # 1. String image ids, class-index categories.
    data = os.path.join(work, "shapes.yaml")
    write_yaml(data, os.path.join(work, "shapes"), val_dir, names)
    run([sys.executable, os.path.join(ROOT, "scripts", "yolo_to_coco.py"), "--data", data],
        os.path.join(work, "convert.log"))
    gt = os.path.join(work, "shapes", "annotations", "instances_val2017.json")
    yolo_map, summary, dt = val_json(bin_dir, weights, data, work, "val")
    with open(dt) as f:
        dets = json.load(f)
    if len(dets) < 100:
        fail(f"{dt}: {len(dets)} detections; the shared model should give hundreds")
    d = dets[0]
    if not (isinstance(d["image_id"], str) and d["image_id"].startswith("val_") and
            d["category_id"] in (0, 1, 2) and len(d["bbox"]) == 4 and 0 < d["score"] <= 1):
        fail(f"{dt}: first entry {d} is not COCO results format with stem image ids")
    stats = pycoco(gt, dt)
    compare("shapes", summary, stats)
    if abs(yolo_map - stats[0]) > 0.02:
        fail(f"val's mAP50-95 {yolo_map} and pycocotools' {stats[0]:.4f} differ by more than 0.02")
    if stats[0] <= 0.005:
        fail(f"pycocotools mAP50-95 {stats[0]:.4f}: the shared model should detect something")

    # 2. COCO's naming: numeric ids, 91-id categories.
    coco = os.path.join(work, "coco")
    os.makedirs(os.path.join(coco, "images", "val2017"))
    os.makedirs(os.path.join(coco, "labels", "val2017"))
    listed = []
    for i, f in enumerate(sorted(os.listdir(val_dir))[:40]):
        stem = f"{1000 + 7 * i:012d}"
        shutil.copy(os.path.join(val_dir, f), os.path.join(coco, "images", "val2017", stem + ".png"))
        shutil.copy(os.path.join(val_dir.replace("images", "labels"), os.path.splitext(f)[0] + ".txt"),
                    os.path.join(coco, "labels", "val2017", stem + ".txt"))
        listed.append(f"./images/val2017/{stem}.png")
    with open(os.path.join(coco, "val2017.txt"), "w") as f:
        f.write("\n".join(listed) + "\n")
    data = os.path.join(work, "coco.yaml")
    write_yaml(data, coco, "val2017.txt", names)
    run([sys.executable, os.path.join(ROOT, "scripts", "yolo_to_coco.py"), "--data", data,
         "--coco91"], os.path.join(work, "convert_coco.log"))
    _, summary, dt = val_json(bin_dir, weights, data, work, "val_coco")
    with open(dt) as f:
        dets = json.load(f)
    ids = {d["image_id"] for d in dets}
    cats = {d["category_id"] for d in dets}
    if not dets or not all(isinstance(i, int) for i in ids) or not ids <= {1000 + 7 * i for i in range(40)}:
        fail(f"{dt}: image ids {sorted(ids)[:5]}... are not the numbers of the file stems")
    if not cats <= {1, 2, 3}:
        fail(f"{dt}: categories {sorted(cats)} are not COCO's ids of classes 0-2 (1, 2, 3)")
    coco_gt = os.path.join(coco, "annotations", "instances_val2017.json")
    compare("coco", summary, pycoco(coco_gt, dt))

    # 3. Training on COCO data scores best.pt with COCO's protocol at the end, as YOLOv5 does.
    out = run([os.path.join(bin_dir, "train"), "--data", data, "--weights", weights, "--cfg",
               "yolov5n.yaml", "--imgsz", "160", "--epochs", "1", "--noplots", "--project", work,
               "--name", "train_coco", "--device", "cpu"], os.path.join(work, "train_coco.log"))
    summary = [float(m) for m in re.findall(r"\] = (-?[0-9.]+)$", out, re.M)]
    dt = os.path.join(work, "train_coco", "best_predictions.json")
    if len(summary) != 12 or not os.path.exists(dt):
        fail("training on COCO-named data did not score best.pt with COCO's protocol "
             f"(summary lines: {len(summary)}, {dt} exists: {os.path.exists(dt)})")
    compare("train on coco", summary, pycoco(coco_gt, dt))
    print(f"COCO JSON: pycocotools mAP50-95 {stats[0]:.4f} mAP50 {stats[1]:.4f} equal val's summary; "
          f"val's own mAP50-95 {yolo_map:.4f}; numeric ids and 91-id categories on COCO-named data, "
          "where training's final validation is COCO-scored too")


if __name__ == "__main__":
    main()

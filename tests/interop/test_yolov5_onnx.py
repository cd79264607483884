"""Usage: test_yolov5_onnx.py BIN_DIR FIXTURE_DIR WORK_DIR
Deploying through YOLOv5: scripts/to_yolov5.py turns the shared model's best.pt into a YOLOv5 v7.0
checkpoint; YOLOv5's own val.py (both pickle layouts), detect.py and export.py load it; the ONNX
file export.py writes, run by onnxruntime with YOLOv5's NMS, and its TorchScript file (a module
returning a tuple) run by our `detect`, find the boxes our `detect` finds on the .pt:
same class, IoU >= 0.95 and |conf difference| <= 0.01 for at least 95 % of them. (Where boxes
crowd, scores that differ in their last digits can tip NMS the other way and change a few boxes of
one image: an error in the model or its decoding mismatches most of them.)
"""
import glob
import os
import re
import shutil
import sys

import cv2
import numpy as np
import onnxruntime
import torch

from interop_common import ROOT, fail, label_boxes, match, run

IMGSZ, CONF, IOU = 160, 0.1, 0.45


def all_row_map50(text, who):
    rows = [l for l in text.splitlines() if re.search(r"^\s+all\s+\d+\s+\d+", l)]
    if not rows:
        fail(f"{who}: no 'all' row in its output")
    return float(rows[-1].split()[-2])


def onnx_boxes(session, img_path):
    from yolov5.utils.general import non_max_suppression, scale_boxes
    im = cv2.imread(img_path)
    x = np.ascontiguousarray(im[:, :, ::-1].transpose(2, 0, 1))[None].astype(np.float32) / 255
    pred = session.run(None, {session.get_inputs()[0].name: x})[0]
    det = non_max_suppression(torch.from_numpy(pred), CONF, IOU, max_det=1000)[0]
    det[:, :4] = scale_boxes(x.shape[2:], det[:, :4], im.shape)  # clipped as detect.py (unrounded)
    return [(int(d[5]), *map(float, d[:4]), float(d[4])) for d in det]


def main():
    bin_dir, fixture, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    best = os.path.join(fixture, "runs", "exp", "weights", "best.pt")
    data = os.path.join(fixture, "data.yaml")
    y5, y5_maps = {}, {}
    for layout in ("pip", "repo"):
        y5[layout] = os.path.join(work, f"yolov5_{layout}.pt")
        run([sys.executable, os.path.join(ROOT, "scripts", "to_yolov5.py"), best, y5[layout],
             "--layout", layout], os.path.join(work, f"convert_{layout}.log"))

    # YOLOv5's val.py on both layouts against ours.
    our_map50 = all_row_map50(run([os.path.join(bin_dir, "val"), "--weights", best, "--data", data,
                                   "--imgsz", str(IMGSZ), "--noplots", "--project", work,
                                   "--name", "ourval"], os.path.join(work, "ourval.log")), "our val")
    for layout, w in y5.items():
        m = all_row_map50(run([sys.executable, "-m", "yolov5.val", "--weights", w, "--data", data,
                               "--imgsz", str(IMGSZ), "--project", work, "--name", f"y5val_{layout}"],
                              os.path.join(work, f"y5val_{layout}.log")), f"YOLOv5 val ({layout})")
        y5_maps[layout] = m
        if abs(m - our_map50) > 0.01:
            fail(f"YOLOv5's val.py on the {layout}-layout checkpoint: mAP50 {m}, ours {our_map50}")

    # Square images, so that YOLOv5's fixed-shape ONNX input and our letterbox are the same pixels.
    sq = os.path.join(work, "images")
    os.makedirs(sq)
    val_dir = os.path.join(fixture, "shapes", "images", "val")
    for f in sorted(os.listdir(val_dir))[:40]:
        im = cv2.imread(os.path.join(val_dir, f))
        cv2.imwrite(os.path.join(sq, os.path.splitext(f)[0] + ".png"),
                    cv2.resize(im, (IMGSZ, IMGSZ), interpolation=cv2.INTER_AREA))
    run([sys.executable, "-m", "yolov5.detect", "--weights", y5["pip"], "--source", sq, "--imgsz",
         str(IMGSZ), "--nosave", "--save-txt", "--project", work, "--name", "y5detect"],
        os.path.join(work, "y5detect.log"))
    if not glob.glob(os.path.join(work, "y5detect", "labels", "*.txt")):
        fail("YOLOv5's detect.py wrote no labels with the converted checkpoint")

    run([sys.executable, "-m", "yolov5.export", "--weights", y5["pip"], "--include", "onnx",
         "torchscript", "--imgsz", str(IMGSZ)], os.path.join(work, "export.log"))
    onnx_path = os.path.splitext(y5["pip"])[0] + ".onnx"
    if not os.path.exists(onnx_path):
        fail(f"YOLOv5's export.py wrote no {onnx_path}")
    run([os.path.join(bin_dir, "detect"), "--weights", best, "--source", sq, "--imgsz", str(IMGSZ),
         "--conf-thres", str(CONF), "--iou-thres", str(IOU), "--save-txt", "--save-conf", "--nosave",
         "--project", work, "--name", "ourdetect"], os.path.join(work, "ourdetect.log"))

    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    total = matched = 0
    worst, min_iou, max_dconf = [], 1.0, 0.0
    for f in sorted(os.listdir(sq)):
        stem = os.path.splitext(f)[0]
        a = label_boxes(os.path.join(work, "ourdetect", "labels"), stem, IMGSZ, IMGSZ)
        b = onnx_boxes(session, os.path.join(sq, f))
        total += max(len(a), len(b))
        m, missed, lo, hi = match(a, b)
        matched += m
        worst += [(stem, *x) for x in missed]
        min_iou, max_dconf = min(min_iou, lo), max(max_dconf, hi)
    if total < 30:
        fail(f"only {total} boxes on {len(os.listdir(sq))} images; the comparison needs more")
    frac = matched / total
    print(f"ONNX via YOLOv5's export.py: {matched}/{total} boxes ({100 * frac:.1f} %) match our "
          f"detect (same class, IoU >= 0.95, |conf diff| <= 0.01; matched: IoU >= {min_iou:.4f}, "
          f"|conf diff| <= {max_dconf:.5f}); YOLOv5's val.py mAP50 {y5_maps}, ours {our_map50}")
    if frac < 0.95:
        fail(f"only {100 * frac:.1f} % of the boxes match (need 95 %); unmatched: {worst[:10]}")

    # The TorchScript file YOLOv5's export.py writes returns a tuple (predictions,): our detect
    # takes its first element, as YOLOv5's own loader does, and finds the boxes it finds on the .pt.
    ts_path = os.path.splitext(y5["pip"])[0] + ".torchscript"
    if not os.path.exists(ts_path):
        fail(f"YOLOv5's export.py wrote no {ts_path}")
    run([os.path.join(bin_dir, "detect"), "--weights", ts_path, "--source", sq, "--imgsz",
         str(IMGSZ), "--conf-thres", str(CONF), "--iou-thres", str(IOU), "--save-txt",
         "--save-conf", "--nosave", "--project", work, "--name", "tsdetect"],
        os.path.join(work, "tsdetect.log"))
    total = matched = 0
    for f in sorted(os.listdir(sq)):
        stem = os.path.splitext(f)[0]
        a = label_boxes(os.path.join(work, "ourdetect", "labels"), stem, IMGSZ, IMGSZ)
        b = label_boxes(os.path.join(work, "tsdetect", "labels"), stem, IMGSZ, IMGSZ)
        total += max(len(a), len(b))
        matched += match(a, b)[0]
    print(f"TorchScript via YOLOv5's export.py in our detect: {matched}/{total} boxes match")
    if total < 30 or matched < 0.95 * total:
        fail(f"our detect on YOLOv5's TorchScript file: {matched}/{total} boxes match the .pt's")


if __name__ == "__main__":
    main()

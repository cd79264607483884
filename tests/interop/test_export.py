"""Usage: test_export.py BIN_DIR FIXTURE_DIR WORK_DIR
Our export program's files, run by the tools that deploy them. For the shared model's best.pt and
for a YOLOv5 .pt of it (scripts/to_yolov5.py, read through our YOLOv5 checkpoint reader):
  - onnxruntime on the .onnx and torch.jit.load on the .torchscript give the model's output
    (YOLOv5 7.0's own DetectionModel with the same weights, fused) within 1e-4 (allclose, rtol and
    atol 1e-4) at two input sizes, and with --dynamic at batch 2 and another size; the metadata
    (ONNX stride and names, TorchScript config.txt) is YOLOv5's;
  - YOLOv5's detect.py on the .onnx and the .torchscript finds the boxes our detect finds on the .pt
    (same class, IoU >= 0.95, |conf difference| <= 0.01, at least 98 % of them), and so does our
    detect on the exported files;
  - our val gives the .pt's mAP50 and mAP50-95 within 0.002 on the .onnx and the .torchscript
    (square images, and the ONNX file fixed at the size the .pt's rectangular batches take, so
    that both see the same pixels).
"""
import ast
import json
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
# Detection runs on square images of SQUARE px at --imgsz IMGSZ: detect.py rounds its boxes to
# whole pixels, which at 160 px alone would cost small boxes their 0.95 IoU.
SQUARE = 640
NAMES = {0: "circle", 1: "rectangle", 2: "triangle"}


def reference_model(weights, yolov5_format):
    """YOLOv5's DetectionModel holding the weights, fused, float32."""
    from yolov5.models.yolo import Model
    ck = torch.load(weights, map_location="cpu", weights_only=False)
    if yolov5_format:
        model = (ck.get("ema") or ck["model"]).float()
    else:  # ours: a state dict under 'model'
        model = Model(os.path.join(ROOT, "configs", "models", "yolov5n.yaml"), ch=3, nc=len(NAMES))
        model.load_state_dict(ck["model"])
    return model.fuse().eval()


def export(bin_dir, weights, log, *flags):
    out = run([os.path.join(bin_dir, "export"), "--weights", weights, *flags], log)
    if "output shape" not in out or "Export complete" not in out:
        fail(f"export printed no output shape or summary: {out[-800:]}")
    return out


def compare(what, got, ref):
    got = np.asarray(got, dtype=np.float32)
    ref = ref.numpy()
    if got.shape != ref.shape:
        fail(f"{what}: output shape {got.shape}, the model's {ref.shape}")
    diff = float(np.abs(got - ref).max())
    if not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
        fail(f"{what}: differs from the model by up to {diff} (allowed: 1e-4 + 1e-4 * |value|)")
    return diff


def check_numbers(bin_dir, work, label, weights, ref):
    """The files against the reference model at several shapes; returns the largest difference."""
    stem = os.path.splitext(weights)[0]
    worst = 0.0
    torch.manual_seed(0)
    for h, w in ((IMGSZ, IMGSZ), (128, 96)):
        export(bin_dir, weights, os.path.join(work, f"export_{label}_{h}x{w}.log"), "--include",
               "torchscript", "onnx", "--imgsz", str(h), str(w))
        x = torch.rand(1, 3, h, w)
        with torch.no_grad():
            y = ref(x)[0]
        session = onnxruntime.InferenceSession(stem + ".onnx", providers=["CPUExecutionProvider"])
        if [i.name for i in session.get_inputs()] != ["images"] or \
                [o.name for o in session.get_outputs()] != ["output0"]:
            fail(f"{label}: the ONNX file's input/output names are not images/output0")
        meta = session.get_modelmeta().custom_metadata_map
        if meta.get("stride") != "32" or ast.literal_eval(meta.get("names", "{}")) != NAMES:
            fail(f"{label}: ONNX metadata {meta}, expected stride 32 and names {NAMES}")
        worst = max(worst, compare(f"{label} ONNX at {h}x{w}",
                                   session.run(None, {"images": x.numpy()})[0], y))
        extra = {"config.txt": ""}
        module = torch.jit.load(stem + ".torchscript", _extra_files=extra)
        config = json.loads(extra["config.txt"])
        if config.get("shape") != [1, 3, h, w] or config.get("stride") != 32 or \
                {int(k): v for k, v in config.get("names", {}).items()} != NAMES:
            fail(f"{label}: TorchScript config.txt {config}")
        with torch.no_grad():
            worst = max(worst, compare(f"{label} TorchScript at {h}x{w}", module(x), y))
            x2 = torch.rand(2, 3, 96, 128)
            worst = max(worst, compare(f"{label} TorchScript at batch 2, 96x128", module(x2),
                                       ref(x2)[0]))
    export(bin_dir, weights, os.path.join(work, f"export_{label}_dynamic.log"), "--include", "onnx",
           "--dynamic", "--imgsz", str(IMGSZ))
    session = onnxruntime.InferenceSession(stem + ".onnx", providers=["CPUExecutionProvider"])
    for shape in ((2, 3, IMGSZ, IMGSZ), (2, 3, 96, 128)):
        x = torch.rand(*shape)
        with torch.no_grad():
            y = ref(x)[0]
        worst = max(worst, compare(f"{label} dynamic ONNX at {shape}",
                                   session.run(None, {"images": x.numpy()})[0], y))
    return worst


def matched_fraction(what, images, ref_dir, got_dir):
    total = matched = 0
    missed = []
    for f in sorted(os.listdir(images)):
        stem = os.path.splitext(f)[0]
        a = label_boxes(ref_dir, stem, SQUARE, SQUARE)
        b = label_boxes(got_dir, stem, SQUARE, SQUARE)
        total += max(len(a), len(b))
        m, miss, _, _ = match(a, b)
        matched += m
        missed += [(stem, *x) for x in miss]
    if total < 30:
        fail(f"{what}: only {total} boxes; the comparison needs more")
    frac = matched / total
    print(f"{what}: {matched}/{total} boxes ({100 * frac:.1f} %) match our detect on the .pt")
    if frac < 0.98:
        fail(f"{what}: only {100 * frac:.1f} % of the boxes match (need 98 %); {missed[:8]}")


def square_dataset(fixture, work):
    """The val images resized to SQUARE x SQUARE with their (normalized) labels, and a data YAML."""
    root = os.path.join(work, "square")
    for sub in ("images", "labels"):
        os.makedirs(os.path.join(root, sub, "val"))
    src = os.path.join(fixture, "shapes")
    for f in sorted(os.listdir(os.path.join(src, "images", "val"))):
        im = cv2.imread(os.path.join(src, "images", "val", f))
        stem = os.path.splitext(f)[0]
        cv2.imwrite(os.path.join(root, "images", "val", stem + ".png"),
                    cv2.resize(im, (SQUARE, SQUARE), interpolation=cv2.INTER_CUBIC))
        lab = os.path.join(src, "labels", "val", stem + ".txt")
        if os.path.exists(lab):
            shutil.copy(lab, os.path.join(root, "labels", "val", stem + ".txt"))
    yaml = os.path.join(work, "square.yaml")
    with open(yaml, "w") as f:
        f.write(f"path: {root}\ntrain: images/val\nval: images/val\n"
                f"names: {[NAMES[i] for i in range(len(NAMES))]}\n")
    return yaml, os.path.join(root, "images", "val")


def val_maps(bin_dir, work, weights, data, name):
    out = run([os.path.join(bin_dir, "val"), "--weights", weights, "--data", data, "--imgsz",
               str(IMGSZ), "--batch-size", "8", "--noplots", "--project", work, "--name", name],
              os.path.join(work, name + ".log"))
    rows = [l for l in out.splitlines() if re.search(r"^\s+all\s+\d+\s+\d+", l)]
    if not rows:
        fail(f"val on {weights}: no 'all' row")
    return tuple(map(float, rows[-1].split()[-2:]))


def main():
    bin_dir, fixture, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    best = os.path.join(work, "ours", "best.pt")
    os.makedirs(os.path.dirname(best))
    shutil.copy(os.path.join(fixture, "runs", "exp", "weights", "best.pt"), best)
    y5 = os.path.join(work, "yolov5", "best.pt")
    os.makedirs(os.path.dirname(y5))
    run([sys.executable, os.path.join(ROOT, "scripts", "to_yolov5.py"), best, y5, "--layout", "pip"],
        os.path.join(work, "convert.log"))

    for label, weights, yolov5_format in (("ours", best, False), ("yolov5", y5, True)):
        worst = check_numbers(bin_dir, work, label, weights, reference_model(weights, yolov5_format))
        print(f"{label}: ONNX and TorchScript within {worst:.2e} of YOLOv5's model at 160x160, "
              f"128x96, batch 2 and --dynamic")

    # Detection: YOLOv5's detect.py and ours on the exported files against ours on the .pt.
    export(bin_dir, best, os.path.join(work, "export_final.log"), "--include", "torchscript",
           "onnx", "--imgsz", str(IMGSZ))
    data, images = square_dataset(fixture, work)
    common = ["--source", images, "--imgsz", str(IMGSZ), "--conf-thres", str(CONF), "--iou-thres",
              str(IOU), "--save-txt", "--save-conf", "--nosave", "--project", work]
    run([os.path.join(bin_dir, "detect"), "--weights", best, *common, "--name", "ours_pt"],
        os.path.join(work, "ours_pt.log"))
    ref_dir = os.path.join(work, "ours_pt", "labels")
    for ext in ("onnx", "torchscript"):
        f = os.path.splitext(best)[0] + "." + ext
        run([sys.executable, "-m", "yolov5.detect", "--weights", f, *common, "--name", f"y5_{ext}"],
            os.path.join(work, f"y5_{ext}.log"))
        matched_fraction(f"YOLOv5's detect.py on best.{ext}", images, ref_dir,
                         os.path.join(work, f"y5_{ext}", "labels"))
        run([os.path.join(bin_dir, "detect"), "--weights", f, *common, "--name", f"ours_{ext}"],
            os.path.join(work, f"ours_{ext}.log"))
        matched_fraction(f"our detect on best.{ext}", images, ref_dir,
                         os.path.join(work, f"ours_{ext}", "labels"))

    # The ONNX file fixed at the shape .pt's rect batches take for square images at IMGSZ (YOLOv5's
    # half-stride padding: 192 px), so that val letterboxes the same pixels for both.
    export(bin_dir, best, os.path.join(work, "export_val.log"), "--include", "onnx", "--imgsz",
           str(IMGSZ + 32))
    maps = {ext: val_maps(bin_dir, work, os.path.splitext(best)[0] + "." + ext, data, f"val_{ext}")
            for ext in ("pt", "onnx", "torchscript")}
    print(f"val mAP50, mAP50-95: {maps}")
    for ext in ("onnx", "torchscript"):
        if max(abs(a - b) for a, b in zip(maps[ext], maps["pt"])) > 0.002:
            fail(f"val on best.{ext}: {maps[ext]}, on best.pt {maps['pt']} (allowed: 0.002)")


if __name__ == "__main__":
    main()

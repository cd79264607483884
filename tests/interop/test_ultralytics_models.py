"""Our anchor-free models against Ultralytics 8.4.190's own, on the same torch:
1. configs/models/yolov8.yaml, yolo11.yaml and yolo26.yaml at every scale (n, s, m, l, x; nc=80):
   the same parameter count, state_dict names and shapes, and strides as Ultralytics'
   DetectionModel;
2. yolov8n and yolo11n with Ultralytics' weights (its random initialisation, BatchNorm statistics
   perturbed) loaded as a state_dict: the same raw head maps and decoded boxes (eval mode) within
   1e-4, and on a fixed batch (train mode) the same assignment (foreground anchors, their target
   boxes and scores), the same three loss terms and total within 1e-4, and the same gradients;
   yolo26n likewise: both heads' raw maps (one-to-many and one-to-one) and the decoded boxes;
3. Ultralytics' own .pt files (a pickled float16 DetectionModel, as its trainer leaves best.pt):
   our loader reads them and gives Ultralytics' outputs; a segmentation model's file is refused
   naming the file and what this trainer runs;
4. detect on such a file (yolo11n, and yolo26n through its one-to-many head) against Ultralytics'
   predict on the same images (its thresholds: conf 0.25, IoU 0.7, 300 boxes): at least 98 % of
   its boxes found with the same class, IoU >= 0.95 and confidence within 0.01, and as many boxes;
5. export of yolo11n's and yolo26n's files in Ultralytics' layout: the TorchScript and ONNX files
   give Ultralytics' raw (1, 4 + nc, N) output within 1e-4; Ultralytics' YOLO() runs yolo11n's
   files with the names and stride of their metadata, and its predict on our ONNX finds the boxes
   our detect finds on it (the same matching as 4); yolo26n exported end to end (--end2end):
   both files give Ultralytics' own (1, 300, 6) end-to-end detections, its predict on our ONNX
   finds our detect's boxes on our TorchScript file, and our detect names what it lacks for the
   ONNX file when OpenCV's dnn module cannot run it;
6. val against Ultralytics' val of the same .pt (yolo11n, and yolo26n through its one-to-many head)
   on a small generated set (labels: its confident detections, shifted so that IoUs spread over
   the thresholds): mAP50 and mAP50-95 within 0.002;
7. scripts/to_ultralytics.py turns our checkpoint (one epoch fine-tuned from that .pt on that set)
   into a file Ultralytics' YOLO() loads, whose model gives our outputs and names.
Usage: test_ultralytics_models.py BIN_DIR OUT_DIR"""
import glob
import os
import re
import shutil
import subprocess
import sys
import types

import torch

from interop_common import ROOT, fail

BIN, OUT = sys.argv[1], sys.argv[2]
os.makedirs(OUT, exist_ok=True)
PROBE = os.path.join(BIN, "model_probe")

from ultralytics.nn.tasks import DetectionModel  # noqa: E402
from ultralytics.utils.loss import E2ELoss, v8DetectionLoss  # noqa: E402


def probe(*args):
    p = subprocess.run([PROBE, *args], capture_output=True, text=True)
    if p.returncode:
        fail(f"model_probe {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p.stdout


def cfg_path(name):
    return os.path.join(ROOT, "configs", "models", name)


def build(name):
    """Ultralytics' model for a scaled name, read from its own packaged YAML."""
    torch.manual_seed(0)
    return DetectionModel(name, ch=3, nc=80, verbose=False)


def close(name, ours, theirs, tol=1e-4):
    if ours.shape != theirs.shape:
        fail(f"{name}: shape {tuple(ours.shape)} vs Ultralytics' {tuple(theirs.shape)}")
    err = ((ours.double() - theirs.double()).abs() / (theirs.double().abs() + 1)).max().item()
    if not err <= tol:
        fail(f"{name}: differs from Ultralytics by {err:.3g} (relative; allowed {tol})")
    return err


# 1. Layer tables: parameters, state_dict entries and strides.
for family in ("yolov8", "yolo11", "yolo26"):
    for scale in "nsmlx":
        name = f"{family}{scale}.yaml"
        theirs = build(name)
        out = probe("summary", cfg_path(name))
        lines = out.splitlines()
        params = int(lines[0].split()[1])
        want = sum(p.numel() for p in theirs.parameters())
        if params != want:
            fail(f"{name}: {params} parameters, Ultralytics has {want}")
        entries = {l.split()[1]: l.split()[2] for l in lines if l.startswith("entry ")}
        sd = {k: "x".join(map(str, v.shape)) or "scalar" for k, v in theirs.state_dict().items()}
        sd = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
        ours = {k: v for k, v in entries.items() if not k.endswith("num_batches_tracked")}
        if ours != sd:
            missing = sorted(set(sd) - set(ours))[:5]
            extra = sorted(set(ours) - set(sd))[:5]
            shapes = [k for k in sd if k in ours and ours[k] != sd[k]][:5]
            fail(f"{name}: state_dict differs (missing {missing}, extra {extra}, shapes {shapes})")
        strides = [int(s) for s in lines[-1].split()[1:]]
        if strides != [int(s) for s in theirs.stride.tolist()]:
            fail(f"{name}: strides {strides} vs {theirs.stride.tolist()}")
        print(f"ok {name}: {params} parameters, {len(ours)} state_dict entries, strides {strides}")

# 2. Same weights: outputs, assignment, losses and gradients.
def perturbed(name):
    """Ultralytics' model with BatchNorm statistics away from 0/1, so eval mode uses them."""
    m = build(name)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.copy_(torch.randn(mod.running_mean.shape, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=g) + 0.5)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.1)
    return m, g


# image, class, cx, cy, w, h (normalised): boxes of several sizes, two in one image that overlap,
# a tiny one (widened for candidates) and one image with a single box.
TARGETS = torch.tensor([
    [0, 3, 0.30, 0.40, 0.30, 0.50],
    [0, 7, 0.35, 0.45, 0.25, 0.40],
    [0, 0, 0.80, 0.20, 0.05, 0.06],
    [0, 12, 0.60, 0.70, 0.50, 0.40],
    [1, 5, 0.50, 0.50, 0.90, 0.80],
])


def check_loss(stem, m, ours, x, branches, criterion):
    """The train-mode loss of model m on x and TARGETS against ours: each branch's assignment
    (branches: (suffix of ours' keys, its v8DetectionLoss, the key of its maps or None)), the
    loss items, the total and every gradient."""
    m.train()
    for p in m.parameters():
        p.grad = None
    preds = m(x)
    batch = {"batch_idx": TARGETS[:, 0], "cls": TARGETS[:, 1:2], "bboxes": TARGETS[:, 2:]}
    for suffix, branch, key in branches:
        with torch.no_grad():
            (fg, _, tboxes, _, _), _, _ = branch.get_assigned_targets_and_loss(
                preds[key] if key else preds, batch)
        if not torch.equal(ours["fg" + suffix], fg):
            fail(f"{stem}{suffix}: {int(ours['fg' + suffix].sum())} foreground anchors vs "
                 f"Ultralytics' {int(fg.sum())} ({int((ours['fg' + suffix] != fg).sum())} differ)")
        close(f"{stem}{suffix} target boxes", ours["target_bboxes" + suffix][fg], tboxes[fg] * 1.0)
        print(f"ok {stem}{suffix}: the same {int(fg.sum())} foreground anchors and target boxes")
    total, items = criterion(preds, batch)
    items = torch.stack(list(items.values())) if isinstance(items, dict) else items
    total.sum().backward()
    close(f"{stem} loss items", ours["items"], items.detach())
    close(f"{stem} loss", ours["loss"].view(-1), total.sum().detach().view(-1))
    worst = 0.0
    for k, p in m.named_parameters():
        if p.grad is None:
            if f"grad.{k}" in ours and ours[f"grad.{k}"].abs().max() > 0:
                fail(f"{stem}: a gradient for {k}, which Ultralytics' loss does not reach")
            continue
        if f"grad.{k}" not in ours:
            fail(f"{stem}: no gradient for {k}")
        worst = max(worst, close(f"{stem} grad {k}", ours[f"grad.{k}"], p.grad, 1e-3))
    print(f"ok {stem}: loss items {[round(v, 5) for v in items.tolist()]} and the total equal, "
          f"gradients within {worst:.2g}")


for name in ("yolov8n.yaml", "yolo11n.yaml"):
    m, g = perturbed(name)
    stem = name[:-5]
    sd_file, in_file, out_file = (os.path.join(OUT, f"{stem}.{k}.pt") for k in ("sd", "in", "out"))
    torch.save({k: v.clone() for k, v in m.state_dict().items()}, sd_file)
    x = torch.rand(2, 3, 96, 128, generator=g)
    torch.save({"x": x, "targets": TARGETS}, in_file)
    probe("state", cfg_path(name), sd_file, in_file, out_file)
    ours = torch.load(out_file)

    m.eval()
    with torch.no_grad():
        y, preds = m(x)
    bs = x.shape[0]
    # Ours per level (bs, 64+nc, ny, nx); theirs boxes (bs, 64, A) and scores (bs, nc, A).
    raw = torch.cat([ours[f"raw.{i}"].reshape(bs, 64 + 80, -1) for i in range(3)], 2)
    close(f"{stem} raw boxes", raw[:, :64], preds["boxes"])
    close(f"{stem} raw scores", raw[:, 64:], preds["scores"])
    ours_y = ours["y"]  # (bs, A, 5+nc): xywh, 1, scores
    if not torch.all(ours_y[..., 4] == 1):
        fail(f"{stem}: the objectness column of an anchor-free model must be 1")
    err = close(f"{stem} decoded", torch.cat([ours_y[..., :4], ours_y[..., 5:]], -1),
                y.transpose(1, 2))
    print(f"ok {stem}: raw and decoded outputs equal Ultralytics' (max relative {err:.2g})")

    m.args = types.SimpleNamespace(box=7.5, cls=0.5, dfl=1.5)
    crit = v8DetectionLoss(m)
    check_loss(stem, m, ours, x, [("", crit, None)], crit)

# YOLO26: the one-to-many head (what val, detect and export run, as Ultralytics 8.4.190 by
# default) and the one-to-one head, with distances in place of DFL bins (reg_max 1); its loss
# trains both (one-to-one on detached features) with L1 distances, weighted 0.8 / 0.2 at first.
m, g = perturbed("yolo26n.yaml")
sd_file, in_file, out_file = (os.path.join(OUT, f"yolo26n.{k}.pt") for k in ("sd", "in", "out"))
torch.save({k: v.clone() for k, v in m.state_dict().items()}, sd_file)
x = torch.rand(2, 3, 96, 128, generator=g)
torch.save({"x": x, "targets": TARGETS}, in_file)
probe("state", cfg_path("yolo26n.yaml"), sd_file, in_file, out_file)
ours = torch.load(out_file)
m.eval()
with torch.no_grad():
    y, preds = m(x)
for key, head in (("raw", "one2many"), ("raw_o2o", "one2one")):
    raw = torch.cat([ours[f"{key}.{i}"].reshape(2, 4 + 80, -1) for i in range(3)], 2)
    close(f"yolo26n {head} boxes", raw[:, :4], preds[head]["boxes"])
    close(f"yolo26n {head} scores", raw[:, 4:], preds[head]["scores"])
err = close("yolo26n decoded", torch.cat([ours["y"][..., :4], ours["y"][..., 5:]], -1),
            y.transpose(1, 2))
print(f"ok yolo26n: both heads' raw maps and the decoded boxes equal Ultralytics' "
      f"(max relative {err:.2g})")
m.args = types.SimpleNamespace(box=7.5, cls=0.5, dfl=1.5, epochs=10)
crit = E2ELoss(m)
check_loss("yolo26n", m, ours, x,
           [("", crit.one2many, "one2many"), ("_o2o", crit.one2one, "one2one")], crit)

# MuSGD: two steps from the same weights with the same gradients (the head's and the first two
# layers', to keep the bfloat16 Newton-Schulz iterations short on the CPU), as training sets it up.
from ultralytics.engine.trainer import BaseTrainer  # noqa: E402

m = build("yolo26n.yaml")
sd_file, in_file, out_file = (os.path.join(OUT, f"musgd.{k}.pt") for k in ("sd", "in", "out"))
start = {k: v.clone() for k, v in m.state_dict().items()}
torch.save(start, sd_file)
g = torch.Generator().manual_seed(3)
grads = {f"g{step}.{k}": torch.randn(p.shape, generator=g) * 0.01
         for step in (1, 2) for k, p in m.named_parameters()
         if re.match(r"model\.(0|1|23)\.", k)}
torch.save(grads, in_file)
probe("musgd", cfg_path("yolo26n.yaml"), sd_file, in_file, out_file)
ours = torch.load(out_file)
trainer = types.SimpleNamespace(args=types.SimpleNamespace(lr0=0.01, warmup_bias_lr=0.1),
                                data={"nc": 80})
opt = BaseTrainer.build_optimizer(trainer, m, name="MuSGD", lr=0.01, momentum=0.9, decay=5e-4)
for step in (1, 2):
    for k, p in m.named_parameters():
        p.grad = grads.get(f"g{step}.{k}")
    opt.step()
worst = 0.0
for k, p in m.named_parameters():
    moved = (p.detach() - start[k]).abs().max().item()
    diff = (ours[k] - p.detach()).abs().max().item()
    if diff > 1e-6 * max(moved, 1e-3):
        fail(f"MuSGD: {k} differs from Ultralytics' by {diff:.3g} after a step of {moved:.3g}")
    worst = max(worst, diff)
print(f"ok MuSGD: two steps equal Ultralytics' (max abs difference {worst:.2g}, bfloat16 "
      f"Newton-Schulz included)")

# 3. Ultralytics' .pt files, stripped as its trainer leaves them (the model in float16).
def ultralytics_pt(model, path):
    import copy
    ckpt = {"date": "2026-11-28", "version": "8.4.190", "epoch": -1, "best_fitness": None,
            "model": copy.deepcopy(model).half(), "ema": None, "updates": None, "optimizer": None,
            "scaler": None, "train_args": {"task": "detect", "imgsz": 640}, "train_metrics": {},
            "train_results": {}}
    for p in ckpt["model"].parameters():
        p.requires_grad = False
    torch.save(ckpt, path)


for name in ("yolov8n.yaml", "yolo11n.yaml", "yolo26n.yaml"):
    m = build(name).eval()
    stem = name[:-5]
    pt, in_file, out_file = (os.path.join(OUT, f"{stem}.ul.{k}") for k in ("pt", "in.pt", "out.pt"))
    ultralytics_pt(m, pt)
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    torch.save({"x": x}, in_file)
    probe("forward", pt, in_file, out_file)
    ours = torch.load(out_file)["y"]
    with torch.no_grad():
        theirs = m.half().float()(x)[0]  # the file's float16 weights, run in float32
    err = close(f"{stem} from its Ultralytics .pt", torch.cat([ours[..., :4], ours[..., 5:]], -1),
                theirs.transpose(1, 2), 1e-3)
    print(f"ok {stem}.pt (Ultralytics' file): our loader gives its outputs "
          f"(max relative {err:.2g})")

from ultralytics.nn.tasks import SegmentationModel  # noqa: E402

seg = os.path.join(OUT, "yolo11n-seg.pt")
ultralytics_pt(SegmentationModel("yolo11n-seg.yaml", ch=3, nc=80, verbose=False), seg)
p = subprocess.run([PROBE, "forward", seg, in_file, out_file], capture_output=True, text=True)
if p.returncode == 0 or "SegmentationModel" not in p.stderr or "detection models" not in p.stderr:
    fail(f"a segmentation .pt: exit {p.returncode}, {p.stderr.strip()[-500:]}")
print(f"ok a segmentation model's .pt is refused: {p.stderr.strip()[-200:]}")

# 4. detect against Ultralytics' predict. An untrained model whose BatchNorm statistics are those
# of the test images (so that its outputs vary from place to place) and whose class logits are
# raised, so that it finds boxes of several classes with spread-out confidences.
import cv2  # noqa: E402
import numpy as np  # noqa: E402
from ultralytics import YOLO  # noqa: E402

img_dir = os.path.join(OUT, "images")
os.makedirs(img_dir, exist_ok=True)
rng = np.random.default_rng(0)
for k, (h, w) in enumerate([(240, 320), (300, 200), (256, 256)]):
    im = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)  # texture, so that outputs vary
    for _ in range(6):
        x, y = int(rng.integers(0, w - 40)), int(rng.integers(0, h - 40))
        color = tuple(int(c) for c in rng.integers(0, 255, 3))
        x2, y2 = x + int(rng.integers(15, 60)), y + int(rng.integers(15, 60))
        cv2.rectangle(im, (x, y), (x2, y2), color, -1)
    cv2.imwrite(os.path.join(img_dir, f"im{k}.jpg"), im)
IMAGES = sorted(glob.glob(os.path.join(img_dir, "*.jpg")))


def detecting(name):
    """The model with the images' BatchNorm statistics and raised class logits, saved as .pt."""
    m = build(name)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.momentum = 1.0
        m.train()
        batch = [cv2.resize(cv2.imread(f), (320, 320))[:, :, ::-1] for f in IMAGES]
        m(torch.from_numpy(np.stack(batch).copy()).permute(0, 3, 1, 2).float() / 255)
        m.eval()
        for seq in [*m.model[-1].cv3, *(getattr(m.model[-1], "one2one_cv3", None) or [])]:
            seq[-1].bias.add_(7.0)
    pt = os.path.join(OUT, f"{name[:-5]}-detect.pt")
    ultralytics_pt(m, pt)
    return m, pt


def detect(weights, out_name, *args):
    """Our detect at Ultralytics' predict thresholds (conf 0.25, IoU 0.7, 300 boxes); returns the
    folder of its labels/*.txt."""
    out = os.path.join(OUT, out_name)
    shutil.rmtree(out, ignore_errors=True)  # --save-txt appends to the label files
    p = subprocess.run([os.path.join(BIN, "detect"), "--weights", weights, "--source", img_dir,
                        "--imgsz", "320", "--conf-thres", "0.25", "--iou-thres", "0.7",
                        "--max-det", "300", "--save-txt", "--save-conf", "--nosave", "--device",
                        "cpu", "--project", out, "--name", "exp", "--exist-ok", *args],
                       capture_output=True, text=True)
    if p.returncode:
        fail(f"detect on {os.path.basename(weights)} exited {p.returncode}: "
             f"{p.stderr.strip()[-1000:]}")
    return os.path.join(out, "exp", "labels")


def predict(weights, **kwargs):
    """Ultralytics' predict, one image at a time as detect runs them (a list would be letterboxed
    to one square)."""
    ul = YOLO(weights, task="detect")
    return [ul.predict(f, imgsz=320, conf=0.25, iou=0.7, max_det=300, device="cpu",
                       verbose=False, **kwargs)[0] for f in IMAGES]


def xyxy(cx, cy, w, h):
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter + 1e-12)


def match(theirs_all, labels, what):
    """Each of Ultralytics' boxes found among ours (labels/*.txt of our detect)."""
    total = matched = ours_n = 0
    for r in theirs_all:
        stem = os.path.splitext(os.path.basename(r.path))[0]
        txt = os.path.join(labels, stem + ".txt")
        ours = [list(map(float, line.split())) for line in open(txt)] if os.path.exists(txt) else []
        ours_n += len(ours)
        used = set()
        for c, box, conf in zip(r.boxes.cls.tolist(), r.boxes.xywhn.tolist(),
                                r.boxes.conf.tolist()):
            total += 1
            for j, o in enumerate(ours):
                # Boxes clipped to the image's edge can have no area (IoU 0/0): equal corners
                # within 0.002 of the image's size match them.
                same = iou(xyxy(*o[1:5]), xyxy(*box)) >= 0.95 or \
                    max(abs(u - v) for u, v in zip(xyxy(*o[1:5]), xyxy(*box))) <= 0.002
                if j not in used and int(o[0]) == int(c) and abs(o[5] - conf) <= 0.01 and same:
                    used.add(j)
                    matched += 1
                    break
    if total < 20:
        fail(f"{what}: Ultralytics' predict found only {total} boxes; the comparison needs more")
    if matched < 0.98 * total or abs(ours_n - total) > 0.02 * total:
        fail(f"{what}: detect matched {matched} of Ultralytics' {total} boxes (ours: {ours_n})")
    print(f"ok {what}: {matched} of Ultralytics' {total} boxes matched (ours {ours_n})")


detecting_models = {}
for name in ("yolo11n.yaml", "yolo26n.yaml"):  # YOLO26 through its one-to-many head and NMS
    m, det_pt = detecting_models[name] = detecting(name)
    match(predict(det_pt), detect(det_pt, f"detect-{name[:-5]}"),
          f"{name[:-5]}: detect finds Ultralytics' predict boxes")
# YOLO26's one-to-one head: top-k without NMS (Ultralytics' nms=False, our --end2end).
_, det_pt = detecting_models["yolo26n.yaml"]
match(predict(det_pt, nms=False), detect(det_pt, "detect-yolo26n-e2e", "--end2end"),
      "yolo26n --end2end: detect finds Ultralytics' predict(nms=False) boxes")
m, det_pt = detecting_models["yolo11n.yaml"]

# 5. Our exports, read by Ultralytics. First their raw output: yolo11n's file of 3 exported at
# 320x256, run by torch.jit.load and onnxruntime, against Ultralytics' model from the same file.
import onnxruntime  # noqa: E402


def export(pt, *args):
    p = subprocess.run([os.path.join(BIN, "export"), "--weights", pt, "--include", "torchscript",
                        "onnx", "--device", "cpu", *args], capture_output=True, text=True)
    if p.returncode:
        fail(f"export {os.path.basename(pt)} exited {p.returncode}: {p.stderr.strip()[-1000:]}")
    return pt[:-3] + ".torchscript", pt[:-3] + ".onnx"


x = torch.rand(1, 3, 320, 256, generator=torch.Generator().manual_seed(3))
for stem in ("yolo11n", "yolo26n"):
    ul_pt = os.path.join(OUT, f"{stem}.ul.pt")
    ts, onnx_file = export(ul_pt, "--imgsz", "320", "256")
    with torch.no_grad():
        theirs = YOLO(ul_pt).model.float().eval()(x)[0]
        ours_ts = torch.jit.load(ts)(x)
    sess = onnxruntime.InferenceSession(onnx_file, providers=["CPUExecutionProvider"])
    ours_onnx = torch.from_numpy(sess.run(None, {"images": x.numpy()})[0])
    for what, ours in (("TorchScript", ours_ts), ("ONNX (onnxruntime)", ours_onnx)):
        err = close(f"our {stem} {what} export", ours, theirs, 1e-4)
        print(f"ok our {stem} {what} file gives Ultralytics' (1, 4 + nc, N) output "
              f"(max relative {err:.2g})")

# Then Ultralytics' YOLO() on the detecting model's files: their metadata, and predict on our
# ONNX (letterboxed to its fixed 320x320, as our detect does) against our detect on it.
ts, onnx_file = export(det_pt, "--imgsz", "320")
for f in (ts, onnx_file):
    ul = YOLO(f, task="detect")
    r = ul.predict(IMAGES[0], imgsz=320, device="cpu", verbose=False)[0]
    if r.names != m.names or int(ul.predictor.model.stride) != 32:
        fail(f"Ultralytics' YOLO({os.path.basename(f)}): names {r.names}, "
             f"stride {ul.predictor.model.stride}")
print("ok Ultralytics' YOLO() reads both files' names and stride")
match(predict(onnx_file), detect(onnx_file, "detect-onnx"),
      "Ultralytics' predict on our ONNX finds our boxes")


def same_detections(what, ours, theirs, score_tol=1e-5, box_tol=1e-3):
    """(1, k, 6) rows x1, y1, x2, y2, score, class, matched whatever their order: rows of equal
    scores may come in either order, and the last few may differ where scores tie at the k-th."""
    if ours.shape != theirs.shape:
        fail(f"{what}: shape {tuple(ours.shape)} vs Ultralytics' {tuple(theirs.shape)}")
    ours, theirs = ours[0].double(), theirs[0].double()
    used, matched = set(), 0
    for t in theirs:
        box_err = (ours[:, :4] - t[:4]).abs().max(1).values
        close_rows = (box_err <= box_tol * (t[:4].abs().max() + 1)) \
            & ((ours[:, 4] - t[4]).abs() <= score_tol) & (ours[:, 5] == t[5])
        for j in close_rows.nonzero().flatten().tolist():
            if j not in used:
                used.add(j)
                matched += 1
                break
    if matched < len(theirs) - 2:
        fail(f"{what}: {matched} of Ultralytics' {len(theirs)} detections matched")
    print(f"ok {what}: {matched} of Ultralytics' {len(theirs)} (1, k, 6) detections matched")


# YOLO26's one-to-one head exported end to end (--end2end; Ultralytics' nms=False): both files
# give the (1, 300, 6) detections of Ultralytics' own end-to-end head (its Detect.postprocess) for
# weights whose scores differ from anchor to anchor (an untrained head's tie, and ties may be
# broken in any order); Ultralytics' predict on our ONNX finds the boxes of our detect on our
# TorchScript file.
e2e_pt = os.path.join(OUT, "yolo26n.e2e.pt")
ultralytics_pt(perturbed("yolo26n.yaml")[0], e2e_pt)
ts, onnx_file = export(e2e_pt, "--imgsz", "320", "256", "--end2end")
ul = YOLO(e2e_pt).model.float().eval()
ul.model[-1].end2end = True
with torch.no_grad():
    theirs = ul(x)[0]
    ours_ts = torch.jit.load(ts)(x)
sess = onnxruntime.InferenceSession(onnx_file, providers=["CPUExecutionProvider"])
meta = sess.get_modelmeta().custom_metadata_map
if meta.get("end2end") != "True":
    fail(f"our end-to-end ONNX file's metadata end2end is {meta.get('end2end')!r}")
ours_onnx = torch.from_numpy(sess.run(None, {"images": x.numpy()})[0])
same_detections("our yolo26n --end2end TorchScript export", ours_ts, theirs)
same_detections("our yolo26n --end2end ONNX export (onnxruntime)", ours_onnx, theirs)
# The detecting yolo26n with its one-to-one class logits lowered again: scores near 1 tie in
# float32, and onnxruntime's TopK breaks ties in another order than torch's.
m26 = detecting_models["yolo26n.yaml"][0]
with torch.no_grad():
    for seq in m26.model[-1].one2one_cv3:
        seq[-1].bias.sub_(5.0)
e2e_det = os.path.join(OUT, "yolo26n-detect-e2e.pt")
ultralytics_pt(m26, e2e_det)
ts, onnx_file = export(e2e_det, "--imgsz", "320", "--end2end")
# Both letterboxed to the ONNX file's fixed 320x320 square (predict's rect=False).
total = 0
for r, t in zip(predict(onnx_file), predict(e2e_det, nms=False, rect=False)):
    rows, want = (torch.cat([x.boxes.xyxy, x.boxes.conf[:, None], x.boxes.cls[:, None]], 1)
                  for x in (r, t))
    total += len(want)
    if len(rows) != len(want):
        fail(f"Ultralytics' predict on our end-to-end ONNX: {len(rows)} boxes in "
             f"{os.path.basename(r.path)}, {len(want)} from its own nms=False")
    if not len(want):
        continue
    # Its .pt runs with BatchNorm fused in its own way: scores within 1e-3, corners within 0.3 px.
    same_detections(f"Ultralytics' predict on our end-to-end ONNX ({os.path.basename(r.path)})",
                    rows[None], want[None], 1e-3, 1e-3)
if total < 20:
    fail(f"Ultralytics' predict on our end-to-end ONNX: only {total} boxes to compare")


def label_rows(folder):
    rows = {}
    for f in sorted(glob.glob(os.path.join(folder, "*.txt"))):
        rows[os.path.basename(f)] = sorted(list(map(float, line.split())) for line in open(f))
    return rows


# Our detect reads the end-to-end TorchScript file as the .pt's one-to-one head.
a = label_rows(detect(ts, "detect-e2e-torchscript"))
b = label_rows(detect(e2e_det, "detect-e2e-pt", "--end2end"))
n = sum(len(r) for r in b.values())
if a.keys() != b.keys() or n < 20 or any(
        len(a[k]) != len(b[k]) or any(max(abs(u - v) for u, v in zip(r, t)) > 1e-3
                                      for r, t in zip(a[k], b[k])) for k in b):
    fail(f"our detect on the end-to-end TorchScript file differs from --end2end on the .pt "
         f"({sum(len(r) for r in a.values())} vs {n} boxes)")
print(f"ok our detect on the end-to-end TorchScript file: the .pt's {n} --end2end boxes")
p = subprocess.run([os.path.join(BIN, "detect"), "--weights", onnx_file, "--source", img_dir,
                    "--imgsz", "320", "--nosave", "--device", "cpu", "--project",
                    os.path.join(OUT, "detect-e2e-onnx")], capture_output=True, text=True)
if onnx_file not in p.stderr or "TopK" not in p.stderr:
    fail(f"our detect on an end-to-end ONNX file (OpenCV's dnn): exit {p.returncode}, "
         f"{p.stderr.strip()[-500:]}")
print(f"ok our detect on an end-to-end ONNX file: exit {p.returncode}, "
      f"{p.stderr.strip().splitlines()[-1][:160]}")

# 6. val against Ultralytics' val of the same .pt on a small generated set: eight 256x320 PNG
# images (one size, so that both letterbox every batch alike: centred in 288x352 with grey, the
# rectangle val picks; PNG, so that both decode the same pixels). The model: a 3-class yolo11n
# (and yolo26n) with the BatchNorm statistics of those inputs (so that its outputs vary from place
# to place), yolo11n's distance bins biased to boxes of a few cells (yolo26n's distances start at
# 2 cells a side) and class logits raised so that scores spread. The labels: its ten most
# confident detections inside each image, on val's input, shifted so that IoUs spread over the
# thresholds.
from ultralytics.utils.nms import non_max_suppression  # noqa: E402

images, inputs = [], []
for k in range(8):
    im = rng.integers(0, 255, (256, 320, 3), dtype=np.uint8)
    for _ in range(6):
        x, y = int(rng.integers(0, 280)), int(rng.integers(0, 216))
        color = tuple(int(c) for c in rng.integers(0, 255, 3))
        cv2.rectangle(im, (x, y), (x + int(rng.integers(15, 60)), y + int(rng.integers(15, 60))),
                      color, -1)
    images.append(im)
    padded = np.full((288, 352, 3), 114, np.uint8)
    padded[16:272, 16:336] = im
    inputs.append(torch.from_numpy(padded[:, :, ::-1].copy()).permute(2, 0, 1).float() / 255)


def val_against_ultralytics(name):
    """Makes the model and its set, runs both vals; returns the .pt and the data YAML."""
    stem = name[:-5]
    set_dir = os.path.join(OUT, f"smallset-{stem}")
    shutil.rmtree(set_dir, ignore_errors=True)
    for sub in ("images", "labels"):
        os.makedirs(os.path.join(set_dir, sub))
    for k, im in enumerate(images):
        cv2.imwrite(os.path.join(set_dir, "images", f"v{k}.png"), im)
    torch.manual_seed(0)
    vm = DetectionModel(name, ch=3, nc=3, verbose=False)
    with torch.no_grad():
        for mod in vm.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.momentum = 1.0
        vm.train()
        vm(torch.stack(inputs))
        vm.eval()
        if vm.model[-1].reg_max > 1:
            for seq in vm.model[-1].cv2:
                seq[-1].bias.copy_((-0.5 * torch.arange(16.0)).repeat(4))
        for seq in [*vm.model[-1].cv3, *(getattr(vm.model[-1], "one2one_cv3", None) or [])]:
            seq[-1].bias.add_(5.5)
    vm.names = {0: "a", 1: "b", 2: "c"}
    small_pt = os.path.join(OUT, f"{stem}-3.pt")
    ultralytics_pt(vm, small_pt)
    net = YOLO(small_pt).model.float().eval()  # the file's float16 weights
    n_labels = 0
    for k, t in enumerate(inputs):
        with torch.no_grad():
            det = non_max_suppression(net(t[None])[0], 0.3, 0.5, max_det=300)[0]
        inside = (det[:, 0] >= 20) & (det[:, 1] >= 20) & (det[:, 2] <= 332) & (det[:, 3] <= 268)
        with open(os.path.join(set_dir, "labels", f"v{k}.txt"), "w") as out:
            for x1, y1, x2, y2, _, c in det[inside][:10].tolist():
                j = rng.normal(0, 0.08, 4)  # IoUs from about 0.5 to 1
                w, h = (x2 - x1) / 320 * (1 + j[2]), (y2 - y1) / 256 * (1 + j[3])
                cx = ((x1 + x2) / 2 - 16) / 320 + j[0] * w
                cy = ((y1 + y2) / 2 - 16) / 256 + j[1] * h
                out.write(f"{int(c)} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}\n")
                n_labels += 1
    set_yaml = os.path.join(set_dir, "data.yaml")
    with open(set_yaml, "w") as f:
        f.write(f"path: {set_dir}\ntrain: images\nval: images\nnames: ['a', 'b', 'c']\n")
    heads = [("", {}, [])]
    if getattr(vm.model[-1], "one2one_cv3", None) is not None:
        heads.append((" --end2end", {"nms": False}, ["--end2end"]))
    for what, ul_args, our_args in heads:
        res = YOLO(small_pt).val(data=set_yaml, imgsz=320, batch=16, conf=0.001, iou=0.7,
                                 max_det=300, device="cpu", plots=False, verbose=False,
                                 project=os.path.join(OUT, f"ulval-{stem}"), name="exp",
                                 exist_ok=True, **ul_args)
        ref50, ref5095 = float(res.box.map50), float(res.box.map)
        p = subprocess.run([os.path.join(BIN, "val"), "--weights", small_pt, "--data", set_yaml,
                            "--imgsz", "320", "--batch-size", "16", "--device", "cpu",
                            "--project", os.path.join(OUT, f"ourval-{stem}"), "--exist-ok",
                            *our_args], capture_output=True, text=True)
        if p.returncode:
            fail(f"val{what} of {stem} exited {p.returncode}: {p.stderr.strip()[-1000:]}")
        row = re.search(r"^\s+all\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s*$",
                        p.stdout + p.stderr, re.M)
        if not row:
            fail(f"val{what} of {stem} printed no 'all' row: {(p.stdout + p.stderr)[-1500:]}")
        m50, m5095 = float(row.group(1)), float(row.group(2))
        print(f"{stem}{what}: val on {n_labels} labels: mAP50 {m50}, mAP50-95 {m5095}; "
              f"Ultralytics' val {ref50:.5f}, {ref5095:.5f}")
        if not 0.05 < ref5095 < 0.95:
            fail(f"{stem}{what}: Ultralytics' val mAP50-95 {ref5095:.4f}: the generated set should "
                 "give a middling mAP")
        if abs(m50 - ref50) > 0.002 or abs(m5095 - ref5095) > 0.002:
            fail(f"{stem}{what}: our val differs from Ultralytics' by more than 0.002")
        print(f"ok {stem}{what}: val's mAP50 and mAP50-95 are Ultralytics' within 0.002")
    return small_pt, set_yaml


small_pt, set_yaml = val_against_ultralytics("yolo11n.yaml")
val_against_ultralytics("yolo26n.yaml")  # one-to-many head with NMS, one-to-one without

# 7. Our checkpoint into Ultralytics: that .pt fine-tuned one epoch on the set, converted.
p = subprocess.run([os.path.join(BIN, "train"), "--weights", small_pt, "--data", set_yaml,
                    "--epochs", "1", "--imgsz", "64", "--batch-size", "8", "--workers", "0",
                    "--device", "cpu", "--noplots", "--project", os.path.join(OUT, "ft"),
                    "--name", "exp", "--exist-ok"], capture_output=True, text=True)
if p.returncode:
    fail(f"train --weights {os.path.basename(small_pt)} exited {p.returncode}: "
         f"{p.stderr.strip()[-1000:]}")
ours_pt = os.path.join(OUT, "ft", "exp", "weights", "last.pt")
converted = os.path.join(OUT, "converted.pt")
p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "to_ultralytics.py"), ours_pt,
                    converted], capture_output=True, text=True)
if p.returncode:
    fail(f"to_ultralytics.py exited {p.returncode}: {p.stderr.strip()[-1000:]}")
x = torch.rand(1, 3, 128, 96, generator=torch.Generator().manual_seed(4))
torch.save({"x": x}, in_file)
probe("forward", converted, in_file, out_file)  # our loader reads the converted file too
probe("forward", ours_pt, in_file, out_file)
ours = torch.load(out_file)["y"]
loaded = YOLO(converted)
with torch.no_grad():
    theirs = loaded.model.float().eval()(x)[0]
err = close("our checkpoint in Ultralytics", torch.cat([ours[..., :4], ours[..., 5:]], -1),
            theirs.transpose(1, 2), 1e-3)
if loaded.names != {0: "a", 1: "b", 2: "c"}:
    fail(f"the converted file's names {list(loaded.names.items())[:3]} are not the run's")
print(f"ok to_ultralytics.py: Ultralytics' YOLO() loads our checkpoint and gives our outputs "
      f"(max relative {err:.2g}, float16 weights)")
print("PASS")

"""Usage: test_yolov5_weights.py BIN_DIR FIXTURE_DIR WORK_DIR
Our programs take YOLOv5 v7.0's own checkpoints: make_yolov5_fixture.py has YOLOv5 7.0.14's
train.py fine-tune the shared model (WORK_DIR/fixture: best.pt, last_unstripped.pt and the
names_list.pt, repo_layout.pt variants, with YOLOv5's detect.py and val.py results on best.pt).
Then, with no --cfg (the architecture comes from the file):
  - our detect on each file finds YOLOv5's detect.py boxes: at least 98 % of them have one of ours
    of the same class, IoU >= 0.95 and |conf difference| <= 0.01, and 98 % of ours one of theirs;
    likewise detect --augment against detect.py --augment (test-time augmentation);
  - detect --save-crop writes detect.py --save-crop's crop files, sizes within a pixel;
  - detect on a folder holding an image and a video (--vid-stride 2, --batch-size 3) writes
    detect.py's per-frame label files (name_<frame>.txt) with its boxes (98 % matched as above)
    and the annotated video at the source's frame rate; the video read as a stream (a file://
    URL, --stream-buffer) gives the same boxes frame by frame; SIGINT ends a stream run with exit
    0 and a readable video; a camera that is not there is a clear error;
  - our val on best.pt gives YOLOv5's val.py mAP50 and mAP50-95 within 0.002; val --task speed
    (two weights) gives val.py --task speed's for each; --task study writes its 11 rows and
    study.png; two --weights for --task val are refused;
  - our train fine-tunes best.pt (its log says "Transferred"): its first epoch's mAP50 is far
    above a from-scratch run's;
  - train --resume last_unstripped.pt is a usage error (exit 2) naming the file and saying it is a
    YOLOv5 checkpoint (its optimizer state is YOLOv5's, not ours);
  - detect's and val's output name the classes as the file does (circle, rectangle, triangle).
"""
import contextlib
import csv
import os
import re
import shutil
import signal
import subprocess
import sys

import cv2

from interop_common import fail, match, run
from make_yolov5_fixture import BATCH, CONF, IMGSZ, IOU, PT_FILES, VAL_CONF, VAL_IOU

HERE = os.path.dirname(os.path.abspath(__file__))
MAP_TOL = 0.002


def read_labels(label_dir, stem, w, h, rnd):
    """--save-txt --save-conf rows as (cls, x1, y1, x2, y2, conf) in pixels; rnd rounds the corners
    to whole pixels, as YOLOv5's detect.py does before writing them (ours are not rounded)."""
    out = []
    path = os.path.join(label_dir, stem + ".txt")
    if os.path.exists(path):
        for line in open(path):
            c, cx, cy, bw, bh, conf = map(float, line.split())
            box = [(cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h]
            out.append((int(c), *[round(v) if rnd else v for v in box], conf))
    return out


def check_names(text, names, who):
    """The class names in detect's per-image lines ('2 circles, 1 triangle') are the file's."""
    seen = set()
    for m in re.finditer(r"^image \d+/\d+ .*?: \d+x\d+ (.*?), [\d.]+ms", text, re.M):
        for item in m.group(1).split(", "):
            if item == "(no detections)":
                continue
            n, name = item.split(" ", 1)
            if name not in names and not (name.endswith("s") and name[:-1] in names):
                fail(f"{who}: class '{name}' in '{m.group(0)}' is not one of the file's {names}")
            seen.add(name if name in names else name[:-1])
    if not seen:
        fail(f"{who}: no class names in its per-image lines")
    return seen


def compare_detect(bin_dir, weights, fx, work, names, ref_dir=None, extra=()):
    """Our detect (with `extra` flags) against YOLOv5's detect.py labels in ref_dir (default: the
    fixture's, without extra flags)."""
    tag = os.path.splitext(os.path.basename(weights))[0] + "".join(f.strip("-") for f in extra)
    images = os.path.join(fx, "shapes", "images", "val")
    text = run([os.path.join(bin_dir, "detect"), "--weights", weights, "--source", images,
                "--imgsz", str(IMGSZ), "--conf-thres", str(CONF), "--iou-thres", str(IOU),
                "--save-txt", "--save-conf", "--nosave", "--project", work, "--name",
                f"detect_{tag}", *extra], os.path.join(work, f"detect_{tag}.log"))
    check_names(text, names, f"our detect --weights {weights}")
    ours_dir = os.path.join(work, f"detect_{tag}", "labels")
    ref_dir = ref_dir or os.path.join(fx, "ref_detect", "labels")
    sizes = {}
    for f in sorted(os.listdir(images)):
        h, w = cv2.imread(os.path.join(images, f)).shape[:2]
        sizes[os.path.splitext(f)[0]] = (w, h)
    compare_label_dirs(ref_dir, ours_dir, sizes,
                       f"detect --weights {os.path.basename(weights)} {' '.join(extra)} "
                       "against YOLOv5's detect.py")


def compare_label_dirs(ref_dir, ours_dir, sizes, who, min_boxes=30, round_ours=True):
    """Labels per file stem (sizes: stem -> (w, h)): 98 % of ref's boxes have one of ours (same
    class, IoU >= 0.95, |conf diff| <= 0.01) and 98 % of ours one of ref's. Ours are rounded to
    whole pixels as detect.py rounds its boxes, unless both sides are ours (round_ours=False):
    rounding one side only moves a box of a few pixels below IoU 0.95."""
    n_ref = n_ours = m_ref = m_ours = 0
    missed, min_iou, max_dconf = [], 1.0, 0.0
    for stem, (w, h) in sorted(sizes.items()):
        ref = read_labels(ref_dir, stem, w, h, rnd=False)
        ours = read_labels(ours_dir, stem, w, h, rnd=round_ours)
        n_ref, n_ours = n_ref + len(ref), n_ours + len(ours)
        m, miss, lo, hi = match(ref, ours)
        m_ref += m
        missed += [(stem, *x) for x in miss]
        min_iou, max_dconf = min(min_iou, lo), max(max_dconf, hi)
        m_ours += match(ours, ref)[0]
    if n_ref < min_boxes:
        fail(f"{who}: the reference found only {n_ref} boxes; the comparison needs {min_boxes}")
    f_ref, f_ours = m_ref / n_ref, m_ours / max(n_ours, 1)
    print(f"{who}: {m_ref}/{n_ref} of the reference's boxes ({100 * f_ref:.1f} %) and "
          f"{m_ours}/{n_ours} of ours ({100 * f_ours:.1f} %) match (same class, IoU >= 0.95, "
          f"|conf diff| <= 0.01; matched: IoU >= {min_iou:.4f}, |conf diff| <= {max_dconf:.5f})")
    if f_ref < 0.98 or f_ours < 0.98:
        fail(f"{who}: only {100 * f_ref:.1f} % of the reference's boxes and {100 * f_ours:.1f} % "
             f"of ours match (need 98 %); unmatched (file, class, conf, best IoU): {missed[:10]}")


def compare_video(bin_dir, fx, work):
    """detect on videos and streams against detect.py on the same video."""
    val = os.path.join(fx, "shapes", "images", "val")
    folder = os.path.join(work, "video_source")
    os.makedirs(folder, exist_ok=True)
    frames = [cv2.imread(os.path.join(val, f)) for f in sorted(os.listdir(val))]
    h, w = frames[0].shape[:2]
    fps = 7
    clip = os.path.join(folder, "clip.avi")
    writer = cv2.VideoWriter(clip, cv2.VideoWriter_fourcc(*"png "), fps, (w, h))  # lossless
    for im in frames:
        writer.write(cv2.resize(im, (w, h)))
    writer.release()
    shutil.copy(os.path.join(val, sorted(os.listdir(val))[0]), os.path.join(folder, "still.jpg"))
    stride, n = 2, len(frames) // 2
    ref = y5_detect(fx, work, "ref_video", folder, save_txt=True, save_conf=True, vid_stride=stride)
    text = run([os.path.join(bin_dir, "detect"), "--weights", os.path.join(fx, "best.pt"),
                "--source", folder, "--imgsz", str(IMGSZ), "--conf-thres", str(CONF),
                "--iou-thres", str(IOU), "--save-txt", "--save-conf", "--vid-stride", str(stride),
                "--batch-size", "3", "--project", work, "--name", "video"],
               os.path.join(work, "video.log"))
    if "image 1/2 " not in text or f"video 2/2 ({n}/{n}) {clip}: " not in text:
        fail(f"detect on {folder}: no 'image 1/2' line or no 'video 2/2 ({n}/{n})' line:\n"
             f"{text[-1500:]}")
    sizes = {"still": (w, h), **{f"clip_{k}": (w, h) for k in range(1, n + 1)}}
    ref_files = sorted(os.listdir(os.path.join(ref, "labels")))
    ours_files = sorted(os.listdir(os.path.join(work, "video", "labels")))
    if ref_files != ours_files:
        fail(f"detect on a video: label files {ours_files[:8]}..., detect.py's {ref_files[:8]}...")
    compare_label_dirs(os.path.join(ref, "labels"), os.path.join(work, "video", "labels"), sizes,
                       f"detect --vid-stride {stride} --batch-size 3 (image + video, "
                       f"{len(ours_files)} label files)")
    out = cv2.VideoCapture(os.path.join(work, "video", "clip.mp4"))
    got = (out.get(cv2.CAP_PROP_FPS), int(out.get(cv2.CAP_PROP_FRAME_COUNT)),
           int(out.get(cv2.CAP_PROP_FRAME_WIDTH)), int(out.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    if got != (fps, n, w, h):
        fail(f"video/clip.mp4: (fps, frames, width, height) {got}, expected {(fps, n, w, h)}")
    print(f"detect on a video: clip.mp4 written with {n} frames at {fps} FPS")

    # The same video as a stream, every frame kept: stream steps count from 0.
    run([os.path.join(bin_dir, "detect"), "--weights", os.path.join(fx, "best.pt"), "--source",
         "file://" + clip, "--stream-buffer", "--imgsz", str(IMGSZ), "--conf-thres", str(CONF),
         "--iou-thres", str(IOU), "--save-txt", "--save-conf", "--vid-stride", str(stride),
         "--nosave", "--project", work, "--name", "stream"], os.path.join(work, "stream.log"))
    stream_dir = os.path.join(work, "stream", "labels")
    renamed = os.path.join(work, "stream_as_video")
    os.makedirs(renamed, exist_ok=True)
    for f in os.listdir(stream_dir):
        k = int(f[len("clip_"):-len(".txt")])
        shutil.copy(os.path.join(stream_dir, f), os.path.join(renamed, f"clip_{k + 1}.txt"))
    clip_sizes = {k: v for k, v in sizes.items() if k.startswith("clip_")}
    compare_label_dirs(os.path.join(work, "video", "labels"), renamed, clip_sizes,
                       "detect on the video as a file:// stream, against the video's frames",
                       round_ours=False)

    # SIGINT during a stream ends the run cleanly: exit 0, the video finished and readable.
    long_clip = os.path.join(work, "long.avi")
    writer = cv2.VideoWriter(long_clip, cv2.VideoWriter_fourcc(*"png "), 25, (160, 128))
    for k in range(600):
        writer.write(cv2.resize(frames[k % len(frames)], (160, 128)))
    writer.release()
    proc = subprocess.Popen([os.path.join(bin_dir, "detect"), "--weights",
                             os.path.join(fx, "best.pt"), "--source", "file://" + long_clip,
                             "--stream-buffer", "--imgsz", str(IMGSZ), "--project", work,
                             "--name", "interrupted"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("0: "):
            proc.send_signal(signal.SIGINT)
            break
    lines += proc.stdout.readlines()
    rc = proc.wait(timeout=120)
    out = cv2.VideoCapture(os.path.join(work, "interrupted", "long.mp4"))
    written = int(out.get(cv2.CAP_PROP_FRAME_COUNT))
    if rc != 0 or not 0 < written < 600:
        fail(f"detect on a stream, SIGINT after the first frame: exit {rc}, {written} frames in "
             f"long.mp4 (expected exit 0 and 1-599 readable frames):\n{''.join(lines[-5:])}")
    print(f"detect on a stream: SIGINT after the first frame ended it with exit 0 and "
          f"{written} of 600 frames in a readable long.mp4")

    p = subprocess.run([os.path.join(bin_dir, "detect"), "--weights", os.path.join(fx, "best.pt"),
                        "--source", "9", "--project", work, "--name", "camera"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode != 2 or "cannot open the stream '9'" not in p.stdout:
        fail(f"detect --source 9 (no camera): exit {p.returncode}, expected 2 naming the stream: "
             f"{p.stdout[-800:]}")


def compare_val_tasks(bin_dir, fx, work, data):
    """val --task speed (two weights) gives val.py --task speed's mAP for each; --task study
    writes one row per study size (YOLOv5's 10 columns) and study.png; --task val refuses two."""
    from yolov5 import val as y5val
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        (_, _, ref50, ref5095, *_), *_ = y5val.run(
            data=os.path.join(fx, "data.yaml"), weights=os.path.join(fx, "best.pt"),
            batch_size=BATCH, imgsz=IMGSZ, conf_thres=0.25, iou_thres=0.45, task="speed",
            device="cpu", workers=0, plots=False, project=work, name="ref_speed", exist_ok=True)
    weights = [os.path.join(fx, "best.pt"), os.path.join(fx, "names_list.pt")]
    text = run([os.path.join(bin_dir, "val"), "--task", "speed", "--weights", *weights, "--data",
                data, "--imgsz", str(IMGSZ), "--batch-size", str(BATCH), "--project", work,
                "--name", "speed"], os.path.join(work, "speed.log"))
    alls = [(float(m.group(1)), float(m.group(2))) for m in re.finditer(
        r"^\s+all\s+\d+\s+\d+\s+[-+\d.e]+\s+[-+\d.e]+\s+([-+\d.e]+)\s+([-+\d.e]+)\s*$",
        text, re.M)]
    if len(alls) != 2 or text.count("Speed: ") != 2:
        fail(f"val --task speed with two weights: {len(alls)} results tables, expected 2")
    for (m50, m5095), w in zip(alls, weights):
        print(f"val --task speed --weights {os.path.basename(w)}: mAP50 {m50}, mAP50-95 {m5095};"
              f" val.py --task speed {ref50:.5f}, {ref5095:.5f}")
        if abs(m50 - ref50) > MAP_TOL or abs(m5095 - ref5095) > MAP_TOL:
            fail(f"val --task speed: mAP50 {m50}, mAP50-95 {m5095}; val.py's {ref50:.5f}, "
                 f"{ref5095:.5f} (tolerance {MAP_TOL})")

    # A study on 4 images (11 sizes up to 1536 px).
    tiny = os.path.join(work, "study_data")
    for sub in ("images", "labels"):
        os.makedirs(os.path.join(tiny, sub, "val"), exist_ok=True)
    val_dir = os.path.join(fx, "shapes", "images", "val")
    for f in sorted(os.listdir(val_dir))[:4]:
        shutil.copy(os.path.join(val_dir, f), os.path.join(tiny, "images", "val"))
        label = os.path.join(fx, "shapes", "labels", "val", os.path.splitext(f)[0] + ".txt")
        if os.path.exists(label):
            shutil.copy(label, os.path.join(tiny, "labels", "val"))
    tiny_yaml = os.path.join(work, "tiny.yaml")
    with open(tiny_yaml, "w") as f:
        f.write(f"path: {tiny}\ntrain: images/val\nval: images/val\n"
                "names: [circle, rectangle, triangle]\n")
    run([os.path.join(bin_dir, "val"), "--task", "study", "--weights", weights[0], "--data",
         tiny_yaml, "--batch-size", "4", "--project", work, "--name", "study"],
        os.path.join(work, "study.log"))
    study = os.path.join(work, "study", "study_tiny_best.txt")
    rows = [l.split() for l in open(study)] if os.path.exists(study) else []
    if len(rows) != 11 or any(len(r) != 10 for r in rows) or \
            not os.path.exists(os.path.join(work, "study", "study.png")):
        fail(f"val --task study: {study} has {len(rows)} rows (expected 11 of 10 values) or no "
             "study.png beside it")
    if not all(float(r[8]) > 0 for r in rows):
        fail(f"val --task study: an inference time is not positive in {study}")
    print(f"val --task study: {study} with 11 rows (256-1536 px) and study.png")
    p = subprocess.run([os.path.join(bin_dir, "val"), "--weights", *weights, "--data", data],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode != 2 or "--weights: one file for --task val" not in p.stdout:
        fail(f"val with two --weights: exit {p.returncode}, expected 2 naming --weights: "
             f"{p.stdout[-500:]}")


def y5_detect(fx, work, name, source, **options):
    """YOLOv5's detect.py on the fixture's best.pt; returns its run folder."""
    from yolov5 import detect as y5detect
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        y5detect.run(weights=os.path.join(fx, "best.pt"), source=source, imgsz=(IMGSZ, IMGSZ),
                     conf_thres=CONF, iou_thres=IOU, device="cpu", nosave=True, project=work,
                     name=name, exist_ok=True, **options)
    return os.path.join(work, name)


def compare_crops(bin_dir, fx, work):
    """detect --save-crop writes YOLOv5's crops: the same files (class folder, image stem and
    number), sizes within 2 pixels, near-equal luma. YOLOv5's detect.py rounds its boxes to whole
    pixels before cropping and ours are not rounded, so each edge of a crop may land a pixel
    apart."""
    images = os.path.join(work, "crop_images")
    os.makedirs(images, exist_ok=True)
    for f in sorted(os.listdir(os.path.join(fx, "shapes", "images", "val")))[:8]:
        shutil.copy(os.path.join(fx, "shapes", "images", "val", f), images)
    ref = os.path.join(y5_detect(fx, work, "ref_crop", images, save_crop=True), "crops")
    run([os.path.join(bin_dir, "detect"), "--weights", os.path.join(fx, "best.pt"), "--source",
         images, "--imgsz", str(IMGSZ), "--conf-thres", str(CONF), "--iou-thres", str(IOU),
         "--save-crop", "--nosave", "--project", work, "--name", "crop"],
        os.path.join(work, "crop.log"))
    ours = os.path.join(work, "crop", "crops")

    def files(d):
        return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)
    if files(ref) != files(ours) or len(files(ref)) < 5:
        fail(f"detect --save-crop: our crops {files(ours)[:12]}, YOLOv5's {files(ref)[:12]}")
    worst = 0.0
    # Luma only: YOLOv5's crops keep full-resolution colour (PIL, 4:4:4), ours do too with OpenCV
    # 4.7 or later, but OpenCV 4.6 (Debian 12) halves the chroma's resolution, which alone moves
    # the mean of a sharp-edged crop's pixels by up to 6. The luma planes are equal.
    for f in files(ref):
        a = cv2.imread(os.path.join(ref, f), cv2.IMREAD_GRAYSCALE)
        b = cv2.imread(os.path.join(ours, f), cv2.IMREAD_GRAYSCALE)
        if abs(a.shape[0] - b.shape[0]) > 2 or abs(a.shape[1] - b.shape[1]) > 2:
            fail(f"detect --save-crop: {f} is {b.shape[:2]}, YOLOv5's {a.shape[:2]}")
        h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
        worst = max(worst, float(cv2.absdiff(a[:h, :w], b[:h, :w]).mean()))
    if worst > 6:
        fail(f"detect --save-crop: a crop's pixels differ from YOLOv5's by {worst:.1f} on average")
    print(f"detect --save-crop: {len(files(ref))} crops, YOLOv5's files and sizes (mean pixel "
          f"luma difference at most {worst:.2f})")


def val_rows(text, who):
    """{'all' or class name: (mAP50, mAP50-95)} from a YOLOv5-style results table."""
    rows = {}
    for m in re.finditer(r"^\s+(\S+)\s+\d+\s+\d+" + r"\s+([-+\d.e]+)" * 4 + r"\s*$",
                         text, re.M):
        rows[m.group(1)] = (float(m.group(4)), float(m.group(5)))
    if "all" not in rows:
        fail(f"{who}: no 'all' row in its output")
    return rows


def first_epoch(results_csv, column="metrics/mAP_0.5"):
    if not os.path.isfile(results_csv):
        fail(f"{results_csv}: missing")
    with open(results_csv) as f:
        rows = [[v.strip() for v in r] for r in csv.reader(f)]
    if column not in rows[0] or len(rows) < 2:
        fail(f"{results_csv}: no '{column}' column or no epoch row (header {rows[0]})")
    return float(rows[1][rows[0].index(column)])


def main():
    bin_dir, fixture, work = (os.path.abspath(p) for p in sys.argv[1:4])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fx = os.path.join(work, "fixture")
    text = run([sys.executable, os.path.join(HERE, "make_yolov5_fixture.py"), fixture, fx],
               os.path.join(work, "fixture.log"))
    print("\n".join(l for l in text.splitlines() if l.startswith(("YOLOv5 best.pt", "Timings"))))
    import json
    import yaml
    with open(os.path.join(fx, "ref_val.json")) as f:
        ref = json.load(f)
    data = os.path.join(fixture, "data.yaml")  # the same images, with our own label caches
    with open(data) as f:
        names = yaml.safe_load(f)["names"]

    for name in PT_FILES:
        compare_detect(bin_dir, os.path.join(fx, name), fx, work, names)
    # Test-time augmentation: YOLOv5's detect.py --augment on the same file.
    images = os.path.join(fx, "shapes", "images", "val")
    ref_tta = y5_detect(fx, work, "ref_augment", images, augment=True, save_txt=True,
                        save_conf=True)
    compare_detect(bin_dir, os.path.join(fx, "best.pt"), fx, work, names,
                   os.path.join(ref_tta, "labels"), ["--augment"])
    compare_crops(bin_dir, fx, work)
    compare_video(bin_dir, fx, work)

    best = os.path.join(fx, "best.pt")
    text = run([os.path.join(bin_dir, "val"), "--weights", best, "--data", data, "--imgsz",
                str(IMGSZ), "--batch-size", str(BATCH), "--conf-thres", str(VAL_CONF),
                "--iou-thres", str(VAL_IOU), "--noplots", "--project", work, "--name", "val"],
               os.path.join(work, "val.log"))
    rows = val_rows(text, "our val")
    if set(rows) != {"all", *names}:
        fail(f"our val's results rows are {sorted(rows)}, expected 'all' and the file's {names}")
    m50, m5095 = rows["all"]
    print(f"val --weights best.pt: mAP50 {m50}, mAP50-95 {m5095}; YOLOv5's val.py "
          f"{ref['mAP50']:.5f}, {ref['mAP50-95']:.5f}")
    if abs(m50 - ref["mAP50"]) > MAP_TOL or abs(m5095 - ref["mAP50-95"]) > MAP_TOL:
        fail(f"our val: mAP50 {m50}, mAP50-95 {m5095}; YOLOv5's val.py {ref['mAP50']:.5f}, "
             f"{ref['mAP50-95']:.5f} (tolerance {MAP_TOL})")

    compare_val_tasks(bin_dir, fx, work, data)

    common = ["--data", data, "--imgsz", str(IMGSZ), "--batch-size", str(BATCH), "--noplots",
              "--device", "cpu", "--seed", "0", "--project", work]
    text = run([os.path.join(bin_dir, "train"), "--weights", best, "--epochs", "3", *common,
                "--name", "finetune"], os.path.join(work, "finetune.log"))
    if "Transferred" not in text:
        fail("train --weights best.pt: no 'Transferred' line in its log")
    run([os.path.join(bin_dir, "train"), "--weights", "", "--cfg", "yolov5n.yaml", "--epochs", "1",
         *common, "--name", "scratch"], os.path.join(work, "scratch.log"))
    ft = first_epoch(os.path.join(work, "finetune", "results.csv"))
    sc = first_epoch(os.path.join(work, "scratch", "results.csv"))
    # The shared model is small and briefly trained (YOLOv5's val.py: mAP50 ~0.1), so the bar is
    # relative to what the file scores: half of it above the from-scratch run's first epoch.
    need = sc + 0.5 * ref["mAP50"]
    print(f"train --weights best.pt: first-epoch mAP50 {ft} (from scratch {sc}, need >= "
          f"{need:.4f})")
    if ft < need:
        fail(f"fine-tuning best.pt: first-epoch mAP50 {ft}, from scratch {sc}; need >= {need:.4f} "
             f"(from-scratch + half of YOLOv5's val.py mAP50 {ref['mAP50']:.4f}): were the "
             "weights transferred?")

    unstripped = os.path.join(fx, "last_unstripped.pt")
    try:
        p = subprocess.run([os.path.join(bin_dir, "train"), "--resume", unstripped],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300, cwd=work)
    except subprocess.TimeoutExpired:
        fail(f"train --resume {unstripped} still ran after 300 s; it should refuse at once")
    with open(os.path.join(work, "resume.log"), "w") as f:
        f.write(p.stdout)
    # A usage error (exit 2): the flag names a file this trainer cannot resume; not a crash or a run.
    if p.returncode != 2 or unstripped not in p.stdout or "YOLOv5" not in p.stdout:
        print(p.stdout[-2000:])
        fail(f"train --resume {unstripped}: exit {p.returncode}, expected 2 with a message "
             "naming the file and saying it is a YOLOv5 checkpoint")
    print(f"train --resume last_unstripped.pt: exit {p.returncode}, "
          f"{p.stdout.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()

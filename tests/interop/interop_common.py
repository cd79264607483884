"""What the interop tests share: failing with a message, running a program with its log kept."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(cmd, log):
    """Runs `cmd`, writes its output to `log`; on a non-zero exit prints its end and fails."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "w") as f:
        f.write(p.stdout)
    if p.returncode:
        print(p.stdout[-4000:])
        fail(f"{' '.join(cmd)} exited {p.returncode} (log: {log})")
    return p.stdout


def box_iou(a, b):
    """IoU of two (x1, y1, x2, y2) boxes."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match(a, b):
    """How many boxes of `a` have their own box in `b`: same class, |conf diff| <= 0.01, IoU >=
    0.95 (in the order of `a`, each taking its best unused box). Returns (matched, unmatched of a, min IoU, max |dconf|)."""
    used, matched, missed, min_iou, max_dconf = set(), 0, [], 1.0, 0.0
    for c, *box, conf in a:
        best_j, best_iou = -1, 0.0
        for j, (c2, *box2, conf2) in enumerate(b):
            if j in used or c2 != c or abs(conf2 - conf) > 0.01:
                continue
            iou = box_iou(box, box2)
            if iou > best_iou:
                best_j, best_iou = j, iou
        if best_iou >= 0.95:
            used.add(best_j)
            matched += 1
            min_iou = min(min_iou, best_iou)
            max_dconf = max(max_dconf, abs(b[best_j][5] - conf))
        else:
            missed.append((c, round(conf, 4), round(best_iou, 3)))
    return matched, missed, min_iou, max_dconf


def label_boxes(label_dir, stem, w, h):
    """--save-txt --save-conf rows of STEM (ours or YOLOv5's) as (cls, x1, y1, x2, y2, conf) in
    pixels of a w x h image; [] when there is no file."""
    out = []
    path = os.path.join(label_dir, stem + ".txt")
    if os.path.exists(path):
        for line in open(path):
            c, cx, cy, bw, bh, conf = map(float, line.split())
            out.append((int(c), (cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w,
                        (cy + bh / 2) * h, conf))
    return out

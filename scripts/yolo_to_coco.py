#!/usr/bin/env python3
"""Write a COCO ground-truth file (instances JSON) from YOLO labels, so that `val --save-json`
can score its predictions with COCO's protocol, and pycocotools can too.

    python3 scripts/yolo_to_coco.py --data data.yaml            # -> <path>/annotations/instances_val2017.json
    python3 scripts/yolo_to_coco.py --images imgs/ --names a,b   # no PyYAML needed

Image ids follow YOLOv5's `val.py --save-json`: int(stem) when the file stem is all digits, else
the stem. Category ids are the class indices, or COCO's 91-id numbering with --coco91 (what YOLOv5
writes for COCO data). Labels are found as YOLOv5 finds them (/images/ -> /labels/, .txt).
Needs only the Python standard library (PyYAML for --data); reads image sizes from PNG, JPEG,
BMP and GIF headers.
"""
import argparse
import json
import os
import struct
import sys

IMG_EXT = {".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png", ".tif", ".tiff", ".webp", ".gif"}
COCO91 = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
          27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51,
          52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77,
          78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90]


def fail(msg):
    sys.exit(f"yolo_to_coco: {msg}")


def image_size(path):
    """(width, height) from the file header, without decoding the image."""
    with open(path, "rb") as f:
        head = f.read(26)
        if head[:8] == b"\x89PNG\r\n\x1a\n":
            return struct.unpack(">II", head[16:24])
        if head[:2] == b"BM":
            w, h = struct.unpack("<ii", head[18:26])
            return w, abs(h)
        if head[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", head[6:10])
        if head[:2] == b"\xff\xd8":
            f.seek(2)
            while True:
                b = f.read(1)
                while b and b != b"\xff":
                    b = f.read(1)
                while b == b"\xff":
                    b = f.read(1)
                if not b:
                    break
                marker = b[0]
                if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                    continue
                size = struct.unpack(">H", f.read(2))[0]
                if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">xHH", f.read(5))
                    return w, h
                f.seek(size - 2, 1)
    fail(f"{path}: cannot read the image size (PNG, JPEG, BMP and GIF are supported)")


def list_images(source, root):
    """YOLOv5's sources: a folder (searched recursively), a .txt list, or a list of those."""
    out = []
    for s in source if isinstance(source, list) else [source]:
        p = s if os.path.isabs(s) else os.path.join(root, s)
        if os.path.isdir(p):
            for d, _, files in os.walk(p):
                out += [os.path.join(d, f) for f in files if os.path.splitext(f)[1].lower() in IMG_EXT]
        elif os.path.isfile(p) and p.endswith(".txt"):
            base = os.path.dirname(p)
            with open(p) as f:
                for line in f:
                    line = line.strip()
                    if line:
                        out.append(line if os.path.isabs(line) else os.path.normpath(os.path.join(base, line)))
        else:
            fail(f"{p}: no such folder or .txt image list")
    return sorted(out)


def label_path(img):
    sa, sb = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return sb.join(img.rsplit(sa, 1)) .rsplit(".", 1)[0] + ".txt"


def image_id(stem):
    return int(stem) if stem.isdigit() else stem


def convert(images, names, coco91):
    if coco91 and len(names) > len(COCO91):
        fail(f"--coco91 maps 80 classes, the data has {len(names)}")
    cat = (lambda c: COCO91[c]) if coco91 else (lambda c: c)
    doc = {"info": {"description": "converted from YOLO labels by scripts/yolo_to_coco.py"},
           "images": [], "annotations": [],
           "categories": [{"id": cat(i), "name": n, "supercategory": ""} for i, n in enumerate(names)]}
    seen = {}
    for img in images:
        stem = os.path.splitext(os.path.basename(img))[0]
        iid = image_id(stem)
        if iid in seen:
            fail(f"{img} and {seen[iid]} give the same image id {iid!r}; COCO needs unique ids")
        seen[iid] = img
        w, h = image_size(img)
        doc["images"].append({"id": iid, "file_name": os.path.basename(img), "width": w, "height": h})
        lp = label_path(img)
        if not os.path.exists(lp):
            continue  # an image without objects
        with open(lp) as f:
            for n, line in enumerate(f, 1):
                v = line.split()
                if not v:
                    continue
                if len(v) != 5:
                    fail(f"{lp}:{n}: expected 'class cx cy w h' (5 values), got {len(v)}")
                try:
                    c, cx, cy, bw, bh = int(v[0]), *map(float, v[1:])
                except ValueError:
                    fail(f"{lp}:{n}: not numbers: {line.strip()!r}")
                if not 0 <= c < len(names):
                    fail(f"{lp}:{n}: class {c} is outside 0..{len(names) - 1}")
                x, y, ww, hh = (cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h
                doc["annotations"].append({"id": len(doc["annotations"]) + 1, "image_id": iid,
                                           "category_id": cat(c), "bbox": [x, y, ww, hh],
                                           "area": ww * hh, "iscrowd": 0})
    return doc


def from_data_yaml(path, split):
    try:
        import yaml
    except ImportError:
        fail("--data needs PyYAML (pip install pyyaml); or give --images and --names instead")
    with open(path) as f:
        d = yaml.safe_load(f)
    names = d.get("names")
    names = [names[k] for k in sorted(names)] if isinstance(names, dict) else names
    if not names or split not in d:
        fail(f"{path}: needs 'names' and '{split}'")
    here = os.path.dirname(os.path.abspath(path))
    root = d.get("path") or here
    if not os.path.isabs(root):
        cand = [os.path.join(here, root), os.path.abspath(root)]
        root = next((c for c in cand if os.path.exists(c)), cand[0])
    return root, list_images(d[split], root), names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="dataset YAML (YOLOv5 format)")
    ap.add_argument("--split", default="val", help="split of --data to convert (default: val)")
    ap.add_argument("--images", help="image folder or .txt list, instead of --data")
    ap.add_argument("--names", help="class names, comma-separated (with --images)")
    ap.add_argument("--coco91", action="store_true", help="COCO's 91-id category numbering")
    ap.add_argument("--out", help="output file (default: <path>/annotations/instances_val2017.json,"
                    " where val --save-json looks)")
    a = ap.parse_args()
    if a.data:
        root, images, names = from_data_yaml(a.data, a.split)
    elif a.images and a.names:
        root, images, names = os.path.dirname(os.path.abspath(a.images)), list_images(a.images, "."), a.names.split(",")
    else:
        fail("give --data, or --images and --names")
    if not images:
        fail("no images found")
    out = a.out or os.path.join(root, "annotations", "instances_val2017.json")
    doc = convert(images, names, a.coco91)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, out)
    print(f"{out}: {len(doc['images'])} images, {len(doc['annotations'])} boxes, "
          f"{len(doc['categories'])} categories")


if __name__ == "__main__":
    main()

"""Usage: make_yolov5_fixture.py FIXTURE_DIR OUT_DIR
Checkpoints as YOLOv5 v7.0's own train.py writes them, for the tests of our reader of them, made
with the yolov5 7.0.14 package only (no downloads): the shared model (FIXTURE_DIR, trained by
train_fixture.sh) turned into a YOLOv5 checkpoint by scripts/to_yolov5.py, fine-tuned 2 epochs by
YOLOv5's train.py, in-process. OUT_DIR (emptied first) then holds:
  best.pt             stripped as train.py leaves it (FP16, no optimizer, names a dict,
                      classes pickled as yolov5.models.*)
  last_unstripped.pt  last.pt as train.py writes it mid-run (optimizer state, EMA, updates, the
                      numpy best_fitness), copied from its 'on_model_save' hook at the last epoch
  names_list.pt       best.pt with model.names a list
  repo_layout.pt      best.pt with the classes pickled as models.yolo.* / models.common.*, as a
                      YOLOv5 clone and Ultralytics' released weights have them
  ref_detect/labels/  YOLOv5's detect.py on best.pt (imgsz 160, conf 0.1, iou 0.45, the val
                      images; --save-txt --save-conf: class, normalized xywh, conf)
  ref_val.json        YOLOv5's val.py on best.pt (imgsz 160, batch 16, conf 0.001, iou 0.6)
  globals.txt         the pickle GLOBALs (module.name) each .pt references
  data.yaml, shapes/  the shared data as YOLOv5 reads it (a copy, so that YOLOv5's label caches
                      land here and not beside our trainer's in FIXTURE_DIR)
The model best.pt holds is the EMA last_unstripped.pt holds (if YOLOv5's best.pt is an earlier
epoch, its stripped last.pt is used instead), so the references fit all four files. Run through
run.sh (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD, one thread).
"""
import contextlib
import json
import os
import pickletools
import shutil
import sys
import time
import zipfile

from interop_common import ROOT, fail

IMGSZ, CONF, IOU = 160, 0.1, 0.45  # detect
VAL_CONF, VAL_IOU, BATCH, EPOCHS = 0.001, 0.6, 16, 2
PT_FILES = ("best.pt", "last_unstripped.pt", "names_list.pt", "repo_layout.pt")


def pickle_globals(path):
    """The set of 'module.name' a torch.save zip's data.pkl refers to (GLOBAL and STACK_GLOBAL)."""
    with zipfile.ZipFile(path) as z:
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1:
            fail(f"{path}: expected one data.pkl in the zip, found {pkl}")
        data = z.read(pkl[0])
    out, memo, strings = set(), {}, []  # strings: the values pushed lately (None: not a string)
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            out.add(f"{module}.{name}")
            strings.append(None)
        elif op.name == "STACK_GLOBAL":
            if len(strings) < 2 or None in strings[-2:]:
                fail(f"{path}: STACK_GLOBAL at an unexpected place")
            out.add(f"{strings[-2]}.{strings[-1]}")
            strings[-2:] = [None]
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                         "SHORT_BINSTRING", "BINSTRING", "STRING"):
            strings.append(arg)
        elif op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = strings[-1] if strings else None
        elif op.name == "MEMOIZE":
            memo[len(memo)] = strings[-1] if strings else None
        elif op.name in ("BINGET", "LONG_BINGET", "GET"):
            strings.append(memo.get(arg))
        else:
            strings.append(None)
        del strings[:-2]
    return out


@contextlib.contextmanager
def argv(args):
    """sys.argv as YOLOv5's parse_opt(known=True) sees it."""
    saved = sys.argv
    sys.argv = args
    try:
        yield
    finally:
        sys.argv = saved


def same_weights(a, b):
    import torch
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def main():
    if len(sys.argv) != 3:
        fail("usage: make_yolov5_fixture.py FIXTURE_DIR OUT_DIR")
    fixture, out = (os.path.abspath(p) for p in sys.argv[1:3])
    src = os.path.join(fixture, "runs", "exp", "weights", "best.pt")
    if not os.path.isfile(src):
        fail(f"{src}: missing (the shared model; tests/interop/train_fixture.sh makes it)")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    times = {}
    t = time.perf_counter()

    def lap(step):
        nonlocal t
        now = time.perf_counter()
        times[step] = now - t
        t = now

    import torch
    import yaml
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import to_yolov5
    from yolov5 import detect as y5detect
    from yolov5 import train as y5train
    from yolov5 import val as y5val
    from yolov5.utils.callbacks import Callbacks
    lap("import")

    # The data as YOLOv5 reads it: a copy without our trainer's label caches and `generate:` key.
    with open(os.path.join(fixture, "data.yaml")) as f:
        d = yaml.safe_load(f)
    shutil.copytree(d["path"], os.path.join(out, "shapes"),
                    ignore=shutil.ignore_patterns("*.cache"))
    data = os.path.join(out, "data.yaml")
    with open(data, "w") as f:
        yaml.safe_dump({"path": os.path.join(out, "shapes"), "train": d["train"], "val": d["val"],
                        "names": d["names"]}, f, sort_keys=False)
    val_images = os.path.join(out, "shapes", d["val"])
    lap("data")

    start = os.path.join(out, "start.pt")
    with argv(["to_yolov5.py", src, start, "--layout", "pip", "--data",
               os.path.join(fixture, "data.yaml")]):
        to_yolov5.main()
    lap("to_yolov5")

    # YOLOv5's training, keeping last.pt as written at the last epoch (before strip_optimizer).
    unstripped = os.path.join(out, "last_unstripped.pt")

    def keep_unstripped(last, epoch, final_epoch, best_fitness, fi):
        if final_epoch:
            shutil.copyfile(last, unstripped)

    callbacks = Callbacks()
    callbacks.register_action("on_model_save", name="keep_unstripped", callback=keep_unstripped)
    with argv(["train.py"]):
        opt = y5train.parse_opt(known=True)
    for k, v in dict(weights=start, cfg="", data=data, imgsz=IMGSZ, batch_size=BATCH,
                     epochs=EPOCHS, device="cpu", workers=0, noplots=True, seed=0,
                     project=os.path.join(out, "runs"), name="train", exist_ok=True).items():
        setattr(opt, k, v)
    y5train.main(opt, callbacks)
    weights_dir = os.path.join(out, "runs", "train", "weights")
    if not os.path.isfile(unstripped):
        fail("YOLOv5's train.py ran no 'on_model_save' at its last epoch")
    lap("train")

    # best.pt: YOLOv5's stripped best.pt when it is the last epoch's EMA, else its stripped last.pt
    best = os.path.join(out, "best.pt")
    ema = torch.load(unstripped, map_location="cpu", weights_only=False)["ema"]
    chosen = "best.pt"
    if not same_weights(torch.load(os.path.join(weights_dir, "best.pt"), map_location="cpu",
                                   weights_only=False)["model"], ema):
        chosen = "last.pt"
    shutil.copyfile(os.path.join(weights_dir, chosen), best)
    ck = torch.load(best, map_location="cpu", weights_only=False)
    if not same_weights(ck["model"], ema):
        fail(f"YOLOv5's stripped {chosen} does not hold the EMA of last_unstripped.pt")
    names = ck["model"].names
    if not isinstance(names, dict):
        fail(f"YOLOv5's best.pt: model.names is a {type(names).__name__}, expected a dict")
    ck["model"].names = [names[i] for i in sorted(names)]
    torch.save(ck, os.path.join(out, "names_list.pt"))
    ck["model"].names = names
    # YOLOv5's attempt_load imported a second copy of its modules as models.* / utils.* (the
    # package puts its own folder on sys.path): set them aside while the classes are renamed.
    aside = {n: sys.modules.pop(n) for n in list(sys.modules)
             if n.split(".")[0] in ("models", "utils")}
    undo = to_yolov5.rename_for_repo(ck["model"], "yolov5.")
    try:
        torch.save(ck, os.path.join(out, "repo_layout.pt"))
    finally:
        undo()
        sys.modules.update(aside)
    lap("variants")

    y5detect.run(weights=best, source=val_images, imgsz=(IMGSZ, IMGSZ), conf_thres=CONF,
                 iou_thres=IOU, device="cpu", save_txt=True, save_conf=True, nosave=True,
                 project=out, name="ref_detect", exist_ok=True)
    n_txt = len(os.listdir(os.path.join(out, "ref_detect", "labels")))
    lap("ref_detect")

    (mp, mr, map50, map5095, *_), maps, map50s, _ = y5val.run(
        data=data, weights=best, batch_size=BATCH, imgsz=IMGSZ, conf_thres=VAL_CONF,
        iou_thres=VAL_IOU, device="cpu", workers=0, half=False, plots=False, verbose=True,
        project=out, name="ref_val", exist_ok=True)
    ref = {"weights": "best.pt", "data": "val split of data.yaml", "imgsz": IMGSZ,
           "batch_size": BATCH, "conf_thres": VAL_CONF, "iou_thres": VAL_IOU, "P": float(mp),
           "R": float(mr), "mAP50": float(map50), "mAP50-95": float(map5095),
           "per_class": {names[i]: {"mAP50": float(map50s[i]), "mAP50-95": float(maps[i])}
                         for i in sorted(names)}}
    with open(os.path.join(out, "ref_val.json"), "w") as f:
        json.dump(ref, f, indent=1)
    lap("ref_val")

    lines = []
    for name in PT_FILES:
        g = sorted(pickle_globals(os.path.join(out, name)))
        lines += [f"[{name}]"] + g + [""]
    with open(os.path.join(out, "globals.txt"), "w") as f:
        f.write("\n".join(lines))
    lap("globals")

    print("\nPickle GLOBALs per file (globals.txt):\n" + "\n".join(lines))
    for name in PT_FILES:
        c = torch.load(os.path.join(out, name), map_location="cpu", weights_only=False)
        m = c["model"]
        print(f"{name}: keys {list(c)}; epoch {c['epoch']}; model {type(m).__module__}."
              f"{type(m).__name__} {next(m.parameters()).dtype}; names {m.names}; "
              f"ema {'yes' if c.get('ema') is not None else 'no'}; optimizer "
              f"{'yes' if c.get('optimizer') is not None else 'no'}; best_fitness "
              f"{type(c['best_fitness']).__name__}")
    print(f"YOLOv5 best.pt from its {chosen}; detect wrote {n_txt} label files; ref_val.json: "
          f"mAP50 {map50:.5f}, mAP50-95 {map5095:.5f}")
    print("Timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()) +
          f"; total {sum(times.values()):.1f}")


if __name__ == "__main__":
    main()

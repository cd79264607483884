#!/usr/bin/env python3
"""YOLOv5 7.0's side of build/bin/bench_infer: the same weights, converted to a YOLOv5 checkpoint
(scripts/to_yolov5.py), timed as bench_infer times ours. bench_infer runs it with the test
Python (.cache/test-venv, where YOLOv5 7.0.14 is installed) and reads these lines of stdout:

    yolov5_model batch=B ms_per_batch=M     model forward, median of --iters after 2 warm-up
    yolov5_detect ms_per_image=M            detect.run over --source, wall time / images
    yolov5_skip reason=TEXT                 nothing was timed, and why

Everything else (YOLOv5's own log, the conversion's) goes to stderr.

    python scripts/bench_infer_yolov5.py --weights W.pt --cfg yolov5s.yaml --work DIR \\
        --imgsz 640 --batches 1,8 --iters 10 --threads 2 --source IMAGES --warmup-source IMAGES2
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def offline_env(work):
    """What YOLOv5 7.0 needs to run offline on PyTorch >= 2.6 (as tests/interop/run.sh sets)."""
    os.environ.setdefault("YOLO_AUTOINSTALL", "false")
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    if not os.environ.get("YOLOV5_CONFIG_DIR"):
        config = os.path.join(work, "yolov5_config")
        os.makedirs(config, exist_ok=True)
        font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
        if os.path.isfile(font) and not os.path.isfile(os.path.join(config, "Arial.ttf")):
            shutil.copy(font, os.path.join(config, "Arial.ttf"))
        os.environ["YOLOV5_CONFIG_DIR"] = config


def is_yolov5_checkpoint(path, torch):
    try:
        ck = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # noqa: BLE001 - anything unreadable here is left to the conversion
        return False
    return isinstance(ck, dict) and isinstance(ck.get("model"), torch.nn.Module)


def yolov5_checkpoint(a, torch):
    """A YOLOv5 checkpoint of --weights: the file itself when it is one, else its conversion."""
    if is_yolov5_checkpoint(a.weights, torch):
        return a.weights
    src = a.weights
    sd = torch.load(src, map_location="cpu", weights_only=True)
    if isinstance(sd, dict) and not isinstance(sd.get("model"), dict):  # a plain state dict
        src = os.path.join(a.work, "state_dict_checkpoint.pt")
        torch.save({"model": dict(sd)}, src)
    out = os.path.join(a.work, "yolov5_converted.pt")
    cmd = [sys.executable, os.path.join(HERE, "to_yolov5.py"), src, out, "--layout", "pip"]
    if a.cfg:
        cmd += ["--cfg", a.cfg]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stderr.write(r.stdout)
    if r.returncode != 0:
        lines = r.stdout.strip().splitlines() or ["exit status %d" % r.returncode]
        raise RuntimeError("scripts/to_yolov5.py failed: " + lines[-1])
    return out


def time_model(ckpt, a, torch, out):
    from yolov5.models.experimental import attempt_load

    device = torch.device("cpu" if a.device == "cpu" else "cuda:" + a.device)
    model = attempt_load(ckpt, device=device, fuse=True).float().eval()
    g = torch.Generator().manual_seed(0)
    for b in a.batches:
        x = torch.rand(b, 3, a.imgsz, a.imgsz, generator=g).to(device)
        times = []
        with torch.no_grad():
            for i in range(2 + a.iters):
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t = time.perf_counter()
                model(x)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                if i >= 2:
                    times.append((time.perf_counter() - t) * 1000)
        print("yolov5_model batch=%d ms_per_batch=%.4f" % (b, statistics.median(times)), file=out,
              flush=True)


def time_detect(ckpt, a, out):
    import yolov5.detect

    def run(source, name):
        yolov5.detect.run(weights=ckpt, source=source, imgsz=(a.imgsz, a.imgsz), nosave=True,
                          device=a.device, project=os.path.join(a.work, "yolov5_runs"), name=name,
                          exist_ok=True)

    run(a.warmup_source, "warmup")
    t = time.perf_counter()
    run(a.source, "timed")
    ms = (time.perf_counter() - t) * 1000 / a.images
    print("yolov5_detect ms_per_image=%.4f" % ms, file=out, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True, help="ours (state dict or checkpoint) or YOLOv5's")
    ap.add_argument("--cfg", default="", help="model YAML for weights that do not name one")
    ap.add_argument("--work", required=True, help="folder for the converted checkpoint and runs")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--batches", default="1,8", help="comma list")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0: leave")
    ap.add_argument("--device", default="cpu", help="cpu or a CUDA index, as detect.py's")
    ap.add_argument("--source", required=True, help="folder of the timed detect images")
    ap.add_argument("--warmup-source", required=True, help="folder of the warm-up images")
    ap.add_argument("--images", type=int, required=True, help="images in --source")
    a = ap.parse_args()
    a.batches = [int(b) for b in a.batches.split(",") if b]

    # Only the result lines on stdout: whatever YOLOv5 or torch print goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.makedirs(a.work, exist_ok=True)
    offline_env(a.work)
    try:
        import torch
        import yolov5
        if not yolov5.__version__.startswith("7.0"):
            raise ImportError("yolov5 %s, not 7.0" % yolov5.__version__)
    except Exception as e:  # noqa: BLE001 - any failure to import means no YOLOv5 rows
        print("yolov5_skip reason=YOLOv5 7.0 is not importable by %s (%s)" % (sys.executable, e),
              file=out, flush=True)
        return 0
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    try:
        ckpt = yolov5_checkpoint(a, torch)
    except Exception as e:  # noqa: BLE001 - reported, not raised: ours still print
        print("yolov5_skip reason=%s" % str(e).replace("\n", " "), file=out, flush=True)
        return 0
    time_model(ckpt, a, torch, out)
    time_detect(ckpt, a, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

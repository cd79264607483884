#!/usr/bin/env python3
"""Reference timing: YOLOv5n's or YOLOv5s's architecture (1,872,157 and 7,235,389 parameters with
80 classes, as YOLOv5 v7.0) written in plain PyTorch, forward + backward of random batches on the
Python torch beside the build (.venv/bin/python for the default build, /usr/bin/python3 for
Debian's). It times model compute only: no data, no loss beyond a sum, no optimizer.

    .venv/bin/python scripts/bench_pytorch_yolov5n.py [THREADS]
    .venv/bin/python scripts/bench_pytorch_yolov5n.py --model yolov5s --device cuda --amp \\
        --imgsz 640 --batch 32

Prints the parameter count, each timed iteration, and `images/s: N` (the median iteration).
On CUDA with --amp, forward runs under autocast (float16) and backward through a GradScaler, as
YOLOv5 trains; on the CPU --amp is bfloat16 autocast (fast where the CPU has AMX or AVX-512 BF16),
which training does not use."""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def pad(k):
    return k // 2


class Conv(nn.Module):
    def __init__(s, c1, c2, k=1, st=1, p=None):
        super().__init__()
        s.conv = nn.Conv2d(c1, c2, k, st, pad(k) if p is None else p, bias=False)
        s.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        s.act = nn.SiLU()

    def forward(s, x):
        return s.act(s.bn(s.conv(x)))


class Bottleneck(nn.Module):
    def __init__(s, c1, c2, shortcut=True):
        super().__init__()
        s.cv1, s.cv2, s.add = Conv(c1, c2, 1), Conv(c2, c2, 3), shortcut and c1 == c2

    def forward(s, x):
        return x + s.cv2(s.cv1(x)) if s.add else s.cv2(s.cv1(x))


class C3(nn.Module):
    def __init__(s, c1, c2, n=1, shortcut=True):
        super().__init__()
        c_ = c2 // 2
        s.cv1, s.cv2, s.cv3 = Conv(c1, c_), Conv(c1, c_), Conv(2 * c_, c2)
        s.m = nn.Sequential(*[Bottleneck(c_, c_, shortcut) for _ in range(n)])

    def forward(s, x):
        return s.cv3(torch.cat((s.m(s.cv1(x)), s.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(s, c1, c2):
        super().__init__()
        c_ = c1 // 2
        s.cv1, s.cv2, s.m = Conv(c1, c_), Conv(c_ * 4, c2), nn.MaxPool2d(5, 1, 2)

    def forward(s, x):
        x = s.cv1(x)
        y1 = s.m(x)
        y2 = s.m(y1)
        return s.cv2(torch.cat((x, y1, y2, s.m(y2)), 1))


class YOLOv5(nn.Module):
    """yolov5n.yaml with widths times `k` (k=2 is yolov5s.yaml: same depth, twice the width)."""

    def __init__(s, k=1, nc=80):
        super().__init__()
        c = [16 * k, 32 * k, 64 * k, 128 * k, 256 * k]
        up = nn.Upsample(None, 2, "nearest")
        s.b = nn.ModuleList([
            Conv(3, c[0], 6, 2, 2), Conv(c[0], c[1], 3, 2), C3(c[1], c[1], 1),
            Conv(c[1], c[2], 3, 2), C3(c[2], c[2], 2), Conv(c[2], c[3], 3, 2), C3(c[3], c[3], 3),
            Conv(c[3], c[4], 3, 2), C3(c[4], c[4], 1), SPPF(c[4], c[4]),
            Conv(c[4], c[3], 1, 1), up, C3(c[4], c[3], 1, False), Conv(c[3], c[2], 1, 1), up,
            C3(c[3], c[2], 1, False), Conv(c[2], c[2], 3, 2), C3(c[3], c[3], 1, False),
            Conv(c[3], c[3], 3, 2), C3(c[4], c[4], 1, False)])
        s.det = nn.ModuleList([nn.Conv2d(ch, 3 * (nc + 5), 1) for ch in (c[2], c[3], c[4])])

    def forward(s, x):
        b = s.b
        for i in range(4):
            x = b[i](x)
        p4 = b[4](x)
        p6 = b[6](b[5](p4))
        x = b[9](b[8](b[7](p6)))
        h10 = b[10](x)
        h14 = b[13](b[12](torch.cat((b[11](h10), p6), 1)))
        o17 = b[15](torch.cat((b[14](h14), p4), 1))
        o20 = b[17](torch.cat((b[16](o17), h14), 1))
        o23 = b[19](torch.cat((b[18](o20), h10), 1))
        return [d(o) for d, o in zip(s.det, (o17, o20, o23))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("threads", nargs="?", type=int, default=1, help="CPU threads (default 1)")
    ap.add_argument("--model", choices=["yolov5n", "yolov5s"], default="yolov5n")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--imgsz", type=int, default=320)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--amp", action="store_true",
                    help="autocast: float16 with a GradScaler on CUDA, bfloat16 on the CPU")
    ap.add_argument("--iters", type=int, default=4, help="timed iterations after one warm-up")
    ap.add_argument("--channels-last", action="store_true", help="NHWC model and input")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    amp_dtype = torch.float16 if dev.type == "cuda" else torch.bfloat16
    torch.backends.cudnn.benchmark = True
    m = YOLOv5(2 if a.model == "yolov5s" else 1).to(dev).train()
    print(sum(p.numel() for p in m.parameters()))
    scaler = torch.amp.GradScaler("cuda") if a.amp and dev.type == "cuda" else None
    x = torch.rand(a.batch, 3, a.imgsz, a.imgsz, device=dev)
    if a.channels_last:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times = []
    for it in range(a.iters + 1):
        m.zero_grad(set_to_none=True)
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=a.amp):
            out = m(x)
            loss = sum(o.float().square().mean() for o in out)
        sync()
        t1 = time.perf_counter()
        (scaler.scale(loss) if scaler else loss).backward()
        sync()
        t2 = time.perf_counter()
        print(f"fwd {t1 - t0:.3f} bwd {t2 - t1:.3f}")
        if it:  # the first iteration pays cuDNN's autotuning and allocations
            times.append(t2 - t0)
    print(f"images/s: {a.batch / statistics.median(times):.1f}")


if __name__ == "__main__":
    main()

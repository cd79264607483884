"""Training quality against Ultralytics 8.4.190 over several seeds: for each seed, both trainers
train the model YAML from scratch on the same data with the same settings
(scripts/bench_vs_ultralytics.py), then the learning curves are put side by side: mean mAP50-95
per epoch, the final mAP50-95 (mean, standard deviation, range), the first epoch at which each
run reaches --threshold, and the time ratios of the whole runs and of their steady epochs.

Usage (through scripts/quality_vs_ultralytics.sh): quality_vs_ultralytics.py --train BIN
       --data DATA.yaml --out DIR [--seeds 5] [--threshold 0.01] [bench_vs_ultralytics.py flags]"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--train", required=True)
ap.add_argument("--data", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--seeds", type=int, default=5)
ap.add_argument("--threshold", type=float, default=0.01)
a, rest = ap.parse_known_args()
bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_vs_ultralytics.py")


def curve(csv_path, column):
    with open(csv_path) as f:
        return [float({k.strip(): v for k, v in r.items()}[column]) for r in csv.DictReader(f)]


def first_epoch(values):
    return next((i + 1 for i, v in enumerate(values) if v >= a.threshold), None)


ours, theirs, ratios, epoch_ratios = [], [], [], []
for seed in range(a.seeds):
    out = os.path.join(a.out, f"seed{seed}")
    p = subprocess.run([sys.executable, bench, "--train", a.train, "--data", a.data, "--out", out,
                        "--seed", str(seed), *rest], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"seed {seed}: {p.stdout[-1000:]}{p.stderr[-2000:]}")
    m = re.search(r"\| whole run, s \| (\d+) \| (\d+) \|", p.stdout)
    ratios.append(int(m.group(1)) / int(m.group(2)))
    m = re.search(r"\| steady epoch, s \| ([\d.]+) \| ([\d.]+) \|", p.stdout)
    epoch_ratios.append(float(m.group(1)) / float(m.group(2)))
    ours.append(curve(os.path.join(out, "ours", "exp", "results.csv"), "metrics/mAP_0.5:0.95"))
    theirs.append(curve(os.path.join(out, "ultralytics", "exp", "results.csv"),
                        "metrics/mAP50-95(B)"))
    print(f"seed {seed}: final mAP50-95 ours {ours[-1][-1]:.4f}, Ultralytics {theirs[-1][-1]:.4f}, "
          f"time ratio {ratios[-1]:.2f} (steady epoch {epoch_ratios[-1]:.2f})", flush=True)


def summary(name, runs):
    final = [r[-1] for r in runs]
    sd = statistics.stdev(final) if len(final) > 1 else 0.0
    firsts = ", ".join(str(first_epoch(r) or "-") for r in runs)
    return (f"| {name} | {statistics.mean(final):.4f} ± {sd:.4f} [{min(final):.4f}-"
            f"{max(final):.4f}] | {firsts} |")


epochs = min(len(r) for r in ours + theirs)
print(f"\n{a.seeds} seeds; {' '.join(rest)}")
print(f"| trainer | final mAP50-95: mean ± sd [range] | first epoch at {a.threshold} per seed |")
print("|---|---|---|")
print(summary("ours", ours))
print(summary("Ultralytics 8.4.190", theirs))
print("\nmean mAP50-95 per epoch")
print("| epoch | " + " | ".join(str(e + 1) for e in range(epochs)) + " |")
print("|---" * (epochs + 1) + "|")
for name, runs in (("ours", ours), ("Ultralytics", theirs)):
    means = [statistics.mean(r[e] for r in runs) for e in range(epochs)]
    print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in means) + " |")
for name, r in (("whole run", ratios), ("steady epoch", epoch_ratios)):
    print(f"{name}, ours / Ultralytics: mean {statistics.mean(r):.2f} [{min(r):.2f}-{max(r):.2f}]")

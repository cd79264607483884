#!/usr/bin/env bash
# Usage: test_quality_vs_yolov5.sh SOURCE_ROOT OUT_DIR
# scripts/quality_vs_yolov5.sh --smoke (2 seeds x 2 epochs of each trainer on 16 shapes images at
# 64 px): both trainers run, the summary has a numeric row for each, curves_e2.csv has both
# trainers at both epochs, and the PNG is one (no quality thresholds). Skipped (exit 77) without
# the test-only Python packages (.cache/test-venv, where YOLOv5 7.0 comes from).
set -euo pipefail
ROOT=${1:?usage: test_quality_vs_yolov5.sh SOURCE_ROOT OUT_DIR}
OUT=${2:?usage: test_quality_vs_yolov5.sh SOURCE_ROOT OUT_DIR}
if [[ ! -x $ROOT/.cache/test-venv/bin/python ]]; then
  echo "skip: $ROOT/.cache/test-venv is missing (scripts/setup.sh --test-packages installs" \
    "YOLOv5 7.0 there)"
  exit 77
fi
rm -rf "$OUT"
status=0
bash "$ROOT/scripts/quality_vs_yolov5.sh" --smoke --out "$OUT" >"$OUT.log" 2>&1 || status=$?
cat "$OUT.log"
[[ $status -eq 0 ]] || { echo "FAIL: quality_vs_yolov5.sh exited $status"; exit 1; }
summary=$OUT/summary_e2.md curves=$OUT/curves_e2.csv png=$OUT/curves_e2.png
fail=0
num='[0-9]+\.[0-9]+'
for who in ours YOLOv5; do
  grep -Eq "^\| $who \| 2 \| $num ± $num \[$num–$num\] \| $num ± $num \| $num \| [^|]+ \| $num " \
    "$summary" || { echo "FAIL: no numeric '$who' row in $summary"; fail=1; }
done
grep -Eq "^ours - YOLOv5 = [-+]$num mAP50 at epoch 2; the spread .* is $num: (within|outside)" \
  "$summary" || { echo "FAIL: no verdict line in $summary"; fail=1; }
for who in ours yolov5; do
  for epoch in 1 2; do
    grep -Eq "^$epoch,$who,metrics/mAP_0\.5,[0-9.e+-]+,[0-9.e+-]+,[0-9.e+-]+,[0-9.e+-]+$" \
      "$curves" || { echo "FAIL: no $who mAP50 row for epoch $epoch in $curves"; fail=1; }
    n=$(grep -c "^$epoch,$who," "$curves" || true)
    [[ $n -eq 8 ]] ||
      { echo "FAIL: $n $who rows for epoch $epoch in $curves (want 8 metrics)"; fail=1; }
  done
done
[[ -f $png && $(head -c 8 "$png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
  { echo "FAIL: $png is not a PNG"; fail=1; }
[[ $fail -eq 0 ]] && echo "summary, curves and plot ok"
exit "$fail"

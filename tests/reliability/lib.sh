# Sourced by the reliability tests: arguments, a temp dir removed on exit, skip and check helpers.
# usage: test_x.sh BIN_DIR REL_TOOL
BIN=${1:?usage: $0 BIN_DIR REL_TOOL}
TOOL=${2:?usage: $0 BIN_DIR REL_TOOL}
skip() { echo "SKIP: $*"; exit 77; }
[ -d "$BIN" ] && [ -f "$TOOL" ] || skip "$BIN or $TOOL is not built"
BIN=$(cd "$BIN" && pwd)  # the tests cd into their temp dir
TOOL=$(cd "$(dirname "$TOOL")" && pwd)/$(basename "$TOOL")
: "${YOLO_ROOT:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
for exe in "$BIN/train" "$BIN/val" "$BIN/detect" "$TOOL"; do
  [ -x "$exe" ] || skip "$exe is not built"
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolo_rel.XXXXXX")
cleanup_hooks=()
cleanup() {
  for h in "${cleanup_hooks[@]}"; do eval "$h" || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
# check EXPECTED_STATUS TEXT -- command...: the exit status must match and the combined output
# must contain TEXT (fixed string); statuses >= 128 (a signal) and 124 (a hang) always fail.
check() {
  local want=$1 text=$2
  shift 3
  local out status=0
  out=$(timeout 120 "$@" 2>&1) || status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: ${*:0:8} -> status $status (want $want), output lacks '$text':"
    tail -8 <<<"$out"
    fails=$((fails + 1))
  else
    echo "ok ($status): $(grep -F -m1 -- "$text" <<<"$out" | cut -c1-200)"
  fi
  LAST_OUT=$out
}
# lacks TEXT: the output of the last check must not contain TEXT.
lacks() {
  if grep -qF -- "$1" <<<"$LAST_OUT"; then
    echo "FAIL: output unexpectedly contains '$1': $(grep -F -m1 -- "$1" <<<"$LAST_OUT")"
    fails=$((fails + 1))
  fi
}
finish() {
  echo "$(basename "$0"): $fails failed"
  [ "$fails" -eq 0 ]
}
# Training flags for a run of seconds on the tiny data.
TINY=(--cfg yolov5n.yaml --imgsz 64 --epochs 1 --batch-size 2 --workers 0 --noplots
      --noautoanchor --device cpu --project "$tmp/runs")

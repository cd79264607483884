# Sourced by the scripts that run our train beside YOLOv5 7.0's (bench_vs_yolov5.sh,
# quality_vs_yolov5.sh), from the repository root.
# yolov5_side_exec NAME ARGS...: checks that the default build and the test venv (YOLOv5 7.0,
# borrowing .venv's torch) are there, naming the setup command that makes what is missing, then
# runs scripts/NAME.py with ARGS on the test venv's Python.
yolov5_side_exec() {
  local name=$1 venv=.cache/test-venv
  shift
  [ -x .venv/bin/python ] && [ -x build/bin/train ] || {
    echo "$name: run scripts/setup.sh first (it makes .venv and build/bin/train)" >&2
    exit 1
  }
  [ -x "$venv/bin/python" ] || {
    echo "$name: $venv is missing; scripts/setup.sh --test-packages installs YOLOv5 7.0 there" >&2
    exit 1
  }
  exec "$venv/bin/python" "scripts/$name.py" "$@"
}

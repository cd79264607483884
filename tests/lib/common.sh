# Helpers shared by the shell tests (source it).

# write_shapes_yaml DIR: DIR/data.yaml describing generated shapes data in DIR/shapes (300 train,
# 100 val images, generated on first use).
write_shapes_yaml() {
  cat >"$1/data.yaml" <<YAML
path: $1/shapes
train: images/train
val: images/val
names: [circle, rectangle, triangle]
generate: shapes
YAML
}

# free_port: a TCP port on 127.0.0.1 that was free a moment ago (for MASTER_PORT).
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_train_test MODE: a fresh temp dir $tmp holding shapes data in $tmp/data.yaml, made the
# working dir; on exit every process whose command line names $tmp is killed and $tmp removed.
start_train_test() {
  MODE=$1
  tmp=$(mktemp -d)
  trap 'pkill -KILL -f "$tmp/" 2>/dev/null || true; rm -rf "$tmp"' EXIT
  write_shapes_yaml "$tmp"
  cd "$tmp"
}

# fail MESSAGE: report a failure of $MODE with the end of $tmp/log, exit 1.
fail() { echo "FAIL ($MODE): $*"; [[ -f "$tmp/log" ]] && tail -30 "$tmp/log"; exit 1; }

# rows CSV: data rows of a results.csv (lines minus the header).
rows() { echo $(($(wc -l <"$1") - 1)); }

# ld_bindings FILE PROGRAM [ARGS...]: the dynamic linker's own trace of every symbol PROGRAM binds
# at start (LD_DEBUG=bindings, LD_BIND_NOW), written to FILE; the program's exit status is ignored.
ld_bindings() {
  local file=$1 dir
  shift
  dir=$(mktemp -d)
  LD_DEBUG=bindings LD_BIND_NOW=1 LD_DEBUG_OUTPUT="$dir/trace" timeout 60 "$@" >/dev/null 2>&1 ||
    true
  cat "$dir"/trace.* >"$file" 2>/dev/null || : >"$file"
  rm -rf "$dir"
}

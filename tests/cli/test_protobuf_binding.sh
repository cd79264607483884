#!/usr/bin/env bash
# Usage: test_protobuf_binding.sh BUILD_DIR
# libtorch_cpu.so carries its own protobuf and exports some of its google::protobuf symbols
# (template instances for its onnx_torch classes, byteswap). The programs that use protobuf
# through ONNX (export) or OpenCV's dnn module (val, detect) must bind every google::protobuf
# symbol they and those libraries use to the protobuf library they were built against, never to
# LibTorch's copies. The dynamic linker's own trace (LD_DEBUG=bindings, every symbol bound at
# start) is read for each; LibTorch's bindings of its own copies to itself show the pattern sees
# them.
set -euo pipefail
BUILD=${1:?usage: test_protobuf_binding.sh BUILD_DIR}
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
MODE=protobuf_binding
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sym="symbol \`_ZN?K?6google8protobuf"
checked=0
for name in export val detect; do
  prog=$BUILD/bin/$name
  [[ -x "$prog" ]] || continue
  libs=$(ldd "$prog" || true)  # captured first: grep -q would cut ldd's pipe short
  grep -q libprotobuf <<<"$libs" || { echo "$name: no protobuf library loaded"; continue; }
  # A LibTorch built against the system's protobuf (Debian's 1.13) carries that same version's
  # template instances, which may serve the protobuf library's own calls; only a LibTorch with its
  # own protobuf (the wheel's) must never be bound to.
  torch_cpu=$(grep -o '/[^ ]*libtorch_cpu\.so[^ ]*' <<<"$libs" | head -1)
  torch_libs=$([[ -n "$torch_cpu" ]] && ldd "$torch_cpu" 2>/dev/null || true)
  if grep -q libprotobuf <<<"$torch_libs"; then
    echo "$name: $(basename "$torch_cpu") itself uses the system protobuf: its instances are that version's"
    checked=$((checked + 1))
    continue
  fi
  ld_bindings "$tmp/all" "$prog" --version
  wrong=$(grep -E "$sym" "$tmp/all" | grep -Ev "binding file [^ ]*libtorch" |
    grep -E "to [^ ]*libtorch" || true)
  [[ -z "$wrong" ]] || { echo "$wrong" | head -5; fail "$name binds protobuf symbols to LibTorch's copies"; }
  good=$(grep -E "$sym" "$tmp/all" | grep -cE "to [^ ]*libprotobuf" || true)
  self=$(grep -E "$sym" "$tmp/all" | grep -E "binding file [^ ]*libtorch" |
    grep -cE "to [^ ]*libtorch" || true)
  ((good > 0)) || fail "$name: no protobuf symbol bound to the protobuf library (is the trace read?)"
  echo "$name: $good protobuf bindings to the protobuf library, none to LibTorch's copies" \
    "(LibTorch binds $self of its own to itself)"
  checked=$((checked + 1))
done
((checked > 0)) || { echo "no program of $BUILD uses a protobuf library: nothing to check"; exit 77; }

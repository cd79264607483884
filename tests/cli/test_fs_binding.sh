#!/usr/bin/env bash
# Usage: test_fs_binding.sh BUILD_DIR
# Every program of the build binds libstdc++'s std::filesystem, never the copies PyTorch's wheels
# export from libtorch*.so (some call a null pointer: remove_all crashed bench_train on a GPU
# machine). The dynamic linker's own trace (LD_DEBUG=bindings, every symbol bound at start) is
# read for each program in bin/ and tests/. The unguarded probe, linked with LibTorch ahead of
# libstdc++, shows the check catches a wrong binding where this LibTorch exports such copies.
set -euo pipefail
BUILD=${1:?usage: test_fs_binding.sh BUILD_DIR}
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
MODE=fs_binding
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints the filesystem bindings of PROGRAM (with ARGS) that resolve into a LibTorch library.
wrong_bindings() {
  ld_bindings "$tmp/trace" "$@"
  grep -E "to [^ ]*libtorch[^ ]*\.so.*symbol \`_ZN?K?St10filesystem" "$tmp/trace" || true
}

checked=0
for prog in "$BUILD"/bin/* "$BUILD"/tests/*; do
  [[ -f "$prog" && -x "$prog" ]] || continue
  case "$(basename "$prog")" in fs_probe_unguarded) continue ;; esac
  head -c 4 "$prog" | grep -q ELF || continue
  # Symbols bind before main runs; the argument only keeps the program from doing real work.
  arg=--version
  [[ "$prog" == "$BUILD"/tests/* ]] && arg=--gtest_list_tests
  bad=$(wrong_bindings "$prog" "$arg")
  [[ -z "$bad" ]] || { sed -n 1,5p <<<"$bad"; fail "$(basename "$prog") binds std::filesystem to LibTorch's copies"; }
  checked=$((checked + 1))
done
((checked > 0)) || fail "no programs found under $BUILD/bin or $BUILD/tests"
echo "$checked programs bind std::filesystem to libstdc++'s definitions"

probe=$BUILD/tests/fs_probe
if [[ -x "$probe" ]]; then
  "$probe" "$tmp" || fail "fs_probe: remove_all did not remove its tree"
fi
unguarded=$BUILD/tests/fs_probe_unguarded
if [[ ! -x "$unguarded" ]]; then
  echo "fs_probe_unguarded not built: the negative control is skipped"
  exit 0
fi
bad=$(wrong_bindings "$unguarded")
exported=0
for lib in $(ldd "$unguarded" | grep -o '/[^ ]*libtorch[^ ]*\.so[^ ]*'); do
  nm -D --defined-only "$lib" 2>/dev/null | grep -q 'St10filesystem' && exported=1
done
if [[ -z "$bad" ]]; then
  ((exported == 0)) || fail "LibTorch exports std::filesystem copies, yet the check saw no wrong \
binding in fs_probe_unguarded: the check is blind"
  echo "this LibTorch exports no std::filesystem copies: nothing for the unguarded probe to bind wrong"
  exit 0
fi
# Here-strings, not `echo | head`: head closing the pipe early would fail the test (pipefail).
echo "the check catches the unguarded probe ($(wc -l <<<"$bad") wrong bindings), e.g.:"
sed -n 1p <<<"$bad"
status=0
"$unguarded" "$tmp" >/dev/null 2>&1 || status=$?
echo "the unguarded probe's remove_all exits $status (139: the crash the guard prevents)"

#!/usr/bin/env bash
# A full disk while saving: the run stops with exit status 1 and a message naming the checkpoint,
# and the previous last.pt/best.pt stay byte for byte as they were. The full disk is simulated
# with `ulimit -f` (writes past the limit fail with EFBIG once SIGXFSZ is ignored), which works as
# root too. Then the same with a read-only run dir.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cd "$tmp"
"$TOOL" dataset "$tmp/data" 4 2
run=(--data "$tmp/data/data.yaml" "${TINY[@]}" --name full --exist-ok)
check 0 "best.pt" -- "$BIN/train" "${run[@]}"
w="$tmp/runs/full/weights"
before=$(sha256sum "$w/last.pt" "$w/best.pt")
# 1 MiB: the small files (opt.yaml, results.csv) fit, a checkpoint (several MB) does not.
check 1 "File too large" -- bash -c 'trap "" XFSZ; ulimit -f 1024; exec "$@"' _ "$BIN/train" "${run[@]}"
grep -qF "$w/last.pt" <<<"$LAST_OUT" || { echo "FAIL: message does not name last.pt"; fails=$((fails + 1)); }
[ "$(sha256sum "$w/last.pt" "$w/best.pt")" = "$before" ] ||
  { echo "FAIL: last.pt/best.pt changed after the failed save"; fails=$((fails + 1)); }
"$TOOL" check "$w/last.pt" "$w/best.pt" || fails=$((fails + 1))
left=$(compgen -G "$w/.*.tmp*" || true)
[ -z "$left" ] || { echo "FAIL: temporary files left: $left"; fails=$((fails + 1)); }
# A read-only run dir. Root writes regardless of permissions, so as root the run is started as
# user nobody (setpriv) on a run dir nobody cannot write.
as=()
if [ "$(id -u)" -eq 0 ]; then
  if command -v setpriv >/dev/null &&
    setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/train" --help >/dev/null 2>&1; then
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    chmod 755 "$tmp"  # nobody reads the data and the run dir
  else
    echo "read-only run dir: not checked (as root, chmod does not stop writes, and user nobody"
    echo "cannot run $BIN/train through setpriv)"
  fi
fi
if [ "$(id -u)" -ne 0 ] || ((${#as[@]})); then
  chmod -R a-w "$tmp/runs/full"
  cleanup_hooks+=("chmod -R u+w '$tmp/runs/full'")
  check 1 "$tmp/runs/full" -- "${as[@]}" "$BIN/train" "${run[@]}"
  grep -qiE "permission denied|read-only" <<<"$LAST_OUT" ||
    { echo "FAIL: the message does not say the folder is not writable"; fails=$((fails + 1)); }
  # Only weights/ read-only: training runs, and the first save fails naming the folder.
  chmod a+w "$tmp/runs/full" "$tmp/runs/full"/*.* "$tmp/data/labels"
  check 1 "cannot create a temporary file in $w" -- "${as[@]}" "$BIN/train" "${run[@]}"
  chmod -R u+w "$tmp/runs/full"
  [ "$(sha256sum "$w/last.pt" "$w/best.pt")" = "$before" ] ||
    { echo "FAIL: last.pt/best.pt changed after a read-only run dir"; fails=$((fails + 1)); }
fi
finish

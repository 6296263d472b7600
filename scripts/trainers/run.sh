#!/usr/bin/env bash
# make trainers: install each trainer into its own venv (install.sh), make trajcomp's output of SWE-like rows
# (make_data.py, with trajcomp's venv), then run each trainer's own data loading on it and print its figures.
# A trainer whose install failed is reported as such, with the install's last lines; the run fails then too.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/.venv/bin}
CACHE="$ROOT/.cache/trainers"
DATA="$CACHE/data"
rc=0
rm -rf "$DATA"
"$BIN/python" "$ROOT/scripts/trainers/make_data.py" "$DATA" || exit 1
for t in trl llamafactory axolotl; do
  if ! bash "$ROOT/scripts/trainers/install.sh" "$t" > "$CACHE/$t.install.log" 2>&1; then
    echo "$t: install failed (last lines of $CACHE/$t.install.log):"; grep -v '^WARNING: Location' "$CACHE/$t.install.log" | tail -5
    rc=1; continue
  fi
  "$CACHE/$t/bin/python" "$ROOT/scripts/trainers/check_$t.py" "$DATA" 2> "$CACHE/$t.check.log" || {
    echo "$t: check failed (see $CACHE/$t.check.log)"; tail -3 "$CACHE/$t.check.log"; rc=1; }
done
[ $rc = 0 ] && echo "make trainers: every figure as promised" || echo "make trainers: FAILED (above)"
exit $rc

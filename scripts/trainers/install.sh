#!/usr/bin/env bash
# Installs each trainer into a venv of its own under .cache/trainers/, one at a time, versions pinned.
# A venv that installed keeps a stamp of its pins and is reused while they stay the same. Usage: install.sh [trl|llamafactory|axolotl]...
# torch is pinned in each: pip's unpinned torch is a CUDA build of several GB (docs/pending/trainers.md says why
# each pin).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="$ROOT/.cache/trainers"
PY311=${PY311:-$(command -v python3.11 || echo "$HOME/.pyenv/versions/3.11.7/bin/python3.11")}
mkdir -p "$CACHE"

stamp() {  # what a venv was installed by: its Python and its install function's text (so its pins)
  "$2" --version; declare -f "install_$1"
}

venv() {  # venv NAME PYTHON: a fresh venv (return 0), or return 1 when its stamp matches today's pins
  local dir="$CACHE/$1"
  if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$(stamp "$1" "$2")" ]; then
    echo "$1: installed already, same pins ($dir)"; return 1
  fi
  rm -rf "$dir"; "$2" -m venv "$dir"; "$dir/bin/pip" install --quiet --upgrade pip
}

done_stamp() {  # written last: a venv whose install failed half-way has none, and is made again
  stamp "$1" "$PY311" > "$CACHE/$1/.installed"
}

install_trl() {
  venv trl "$PY311" || return 0
  local pip="$CACHE/trl/bin/pip"
  # torch 2.13.0 is the CPU build that lies on this machine's disk for Python 3.11.
  $pip install --quiet torch==2.13.0
  $pip install --quiet trl==1.16.0 transformers==5.6.0 datasets==4.8.4 accelerate==1.15.0
  done_stamp trl
}

install_llamafactory() {
  venv llamafactory "$PY311" || return 0
  local pip="$CACHE/llamafactory/bin/pip"
  # LLaMA-Factory asks for torchaudio and torchvision: torch 2.9.1 is the release all three install with here.
  $pip install --quiet torch==2.9.1 torchvision==0.24.1
  $pip install --quiet torch==2.9.1 'torchaudio==2.9.*'
  $pip install --quiet torch==2.9.1 torchvision==0.24.1 'torchaudio==2.9.*' llamafactory==0.9.5
  done_stamp llamafactory
}

install_axolotl() {
  venv axolotl "$PY311" || return 0
  local pip="$CACHE/axolotl/bin/pip"
  # axolotl 0.19.0 asks for torch >=2.11,<=2.13.0: 2.13.0 is the CPU build on this disk.
  $pip install --quiet torch==2.13.0
  $pip install --quiet torch==2.13.0 axolotl==0.19.0
  done_stamp axolotl
}

for t in "${@:-trl llamafactory axolotl}"; do
  for one in $t; do
    echo "== installing $one ($(date -u +%H:%M:%S))"
    "install_$one"
    echo "== $one done ($(date -u +%H:%M:%S))"
  done
done

#!/usr/bin/env bash
# Installs each trainer into a venv of its own under .cache/trainers/, one at a time, versions pinned.
# A venv that installed once keeps a stamp and is not touched again. Usage: install.sh [trl|llamafactory|axolotl]...
# torch is pinned in each: pip's unpinned torch is a CUDA build of several GB (docs/pending/trainers.md says why
# each pin).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="$ROOT/.cache/trainers"
PY311=${PY311:-$(command -v python3.11 || echo "$HOME/.pyenv/versions/3.11.7/bin/python3.11")}
mkdir -p "$CACHE"

venv() {  # venv NAME PYTHON: a fresh venv, or exit 0 from the caller's subshell when its stamp is there
  local dir="$CACHE/$1"
  [ -f "$dir/.installed" ] && { echo "$1: installed already ($dir)"; return 1; }
  rm -rf "$dir"; "$2" -m venv "$dir"; "$dir/bin/pip" install --quiet --upgrade pip
}

install_trl() {
  venv trl "$PY311" || return 0
  local pip="$CACHE/trl/bin/pip"
  # torch 2.13.0 is the CPU build that lies on this machine's disk for Python 3.11.
  $pip install --quiet torch==2.13.0
  $pip install --quiet trl==1.16.0 transformers==5.6.0 datasets==4.8.4 accelerate==1.15.0
  touch "$CACHE/trl/.installed"
}

install_llamafactory() {
  venv llamafactory "$PY311" || return 0
  local pip="$CACHE/llamafactory/bin/pip"
  # LLaMA-Factory asks for torchaudio and torchvision: torch 2.9.1 is the release all three install with here.
  $pip install --quiet torch==2.9.1 torchvision==0.24.1
  $pip install --quiet torch==2.9.1 'torchaudio==2.9.*'
  $pip install --quiet torch==2.9.1 torchvision==0.24.1 'torchaudio==2.9.*' llamafactory==0.9.5
  touch "$CACHE/llamafactory/.installed"
}

install_axolotl() {
  venv axolotl "$PY311" || return 0
  local pip="$CACHE/axolotl/bin/pip"
  # axolotl 0.19.0 asks for torch >=2.11,<=2.13.0: 2.13.0 is the CPU build on this disk.
  $pip install --quiet torch==2.13.0
  $pip install --quiet torch==2.13.0 axolotl==0.19.0
  touch "$CACHE/axolotl/.installed"
}

for t in "${@:-trl llamafactory axolotl}"; do
  for one in $t; do
    echo "== installing $one ($(date -u +%H:%M:%S))"
    "install_$one"
    echo "== $one done ($(date -u +%H:%M:%S))"
  done
done

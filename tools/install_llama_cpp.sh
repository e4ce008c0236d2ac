#!/usr/bin/env bash
# Installs llama-cpp-python (the `llama` extra: the demo's and bench/'s llama_cpp reference row)
# into the active environment, built from its sdist for the CPU this runs on. About 8-10 min on
# 2 cores.
#
# Why not plain `pip install ".[llama]"`: its default build (GGML_NATIVE) enables whatever the
# compiler sees, and on the virtual machines this project is developed on llama.cpp's AMX kernels
# fault; explicit AVX512 flags crash a CPU without AVX512 (illegal instruction). So: native off,
# AMX off, and each x86 extension on only where /proc/cpuinfo lists it.
set -euo pipefail
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]] && echo ON || echo OFF; }
args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
args+=" -DGGML_AVX=$(has avx) -DGGML_AVX2=$(has avx2) -DGGML_FMA=$(has fma) -DGGML_F16C=$(has f16c)"
args+=" -DGGML_AVX512=$(has avx512f) -DGGML_AVX512_VNNI=$(has avx512_vnni) -DGGML_AVX512_BF16=$(has avx512_bf16)"
echo "llama-cpp-python build flags: $args"
CMAKE_ARGS="$args" pip install "llama-cpp-python==0.3.36" "$@"

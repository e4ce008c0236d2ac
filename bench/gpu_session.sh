#!/usr/bin/env bash
# One prepared run on a lent GPU (the GPU issue): the CUDA tests, then the GPU benchmarks in order
# of value, each bounded, results as files under $OUT (default /tmp/gpu_out). Run from the
# repository root with the package importable (pip install ".[test]", or PYTHONPATH=python after
# `make dev`) and the default model fetched or fetchable. It must finish in under 10 minutes.
#
# Not yet here: the graph-captured step (CUDA graphs over the lean step's static shapes) and the
# launch/sync counts before and after; the script measures what exists: transformers' eager and
# static-cache generate(), prompt lookup, the drafted rows on transformers' forward and on the
# lean dense step, float32 identity on CUDA.
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - start )) s: $*" | tee -a "$OUT/session.log"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
stamp "CUDA tests"
timeout 180 python -m pytest -q -p no:cacheprovider tests/test_engine_device.py tests/test_verify_multi_draft.py \
  tests/test_verify_sampling.py tests/test_lean_step.py -k "cuda or device" > "$OUT/pytest_cuda.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest_cuda.log"
stamp "float32 identity and bf16 speed of the plug-in on CUDA"
timeout 150 python bench/cuda_checks.py --model "$(python -c 'from draftlattice.default_model import fetch_default; print(fetch_default())')" \
  --heads lm_models/smollm2/heads --json "$OUT/cuda_checks.json" > "$OUT/cuda_checks.log" 2>&1
stamp "bf16 rows at batch 1, 4, 16 (eager, static cache, prompt lookup, drafted, lean dense)"
timeout 240 python bench/hf_speed.py --device cuda --dtype bfloat16 --batch 1 4 16 --prompts 16 --repeats 3 \
  --static --lean dense --json "$OUT/hf_speed_bf16.json" > "$OUT/hf_speed_bf16.log" 2>&1
stamp "float32 identity of the drafted rows on the lean dense step (batch 1 and 4)"
timeout 120 python bench/hf_speed.py --device cuda --dtype float32 --batch 1 4 --prompts 8 --repeats 1 \
  --lean dense --json "$OUT/hf_speed_fp32.json" > "$OUT/hf_speed_fp32.log" 2>&1
stamp done

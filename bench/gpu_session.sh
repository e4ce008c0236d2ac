#!/usr/bin/env bash
# One prepared run on a lent GPU (the GPU issue): the CUDA tests, then the GPU benchmarks in order
# of value, each bounded, results as files under $OUT (default /tmp/gpu_out; every benchmark
# writes its JSON row by row, so one cut short keeps what it measured). Run from the repository
# root with the package importable (pip install ".[test]", or PYTHONPATH=python after `make dev`)
# and the default model fetched or fetchable. It must finish in under 10 minutes (the timeouts
# below add up to 570 s).
#
# Ways of running the target, measured side by side: transformers' eager and static-cache
# generate(), prompt lookup, the drafted rows on transformers' forward, on the dense lean step,
# and on the lean step at fixed shapes (GraphedStep: each verification forward one CUDA graph
# replay); kernel launches and host waits per step for each; float32 identity on CUDA.
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - start )) s: $*" | tee -a "$OUT/session.log"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
stamp "CUDA tests"
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_engine_device.py tests/test_verify_multi_draft.py \
  tests/test_verify_sampling.py tests/test_lean_step.py tests/test_graphed_step.py -k "cuda or device" \
  > "$OUT/pytest_cuda.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest_cuda.log"
stamp "kernel launches and host waits per step (transformers, lean dense, graphed)"
timeout 90 python bench/step_launches.py --device cuda --dtype bfloat16 --json "$OUT/step_launches.json" \
  > "$OUT/step_launches.log" 2>&1
stamp "bf16 rows at batch 1 (eager, static cache, prompt lookup, drafted: transformers, lean dense, graphed)"
timeout 150 python bench/hf_speed.py --device cuda --dtype bfloat16 --batch 1 --prompts 8 --repeats 3 \
  --static --lean dense --graphed --json "$OUT/hf_speed_bf16_b1.json" > "$OUT/hf_speed_bf16_b1.log" 2>&1
stamp "bf16 rows at batch 4 and 16"
timeout 120 python bench/hf_speed.py --device cuda --dtype bfloat16 --batch 16 4 --prompts 16 --repeats 2 \
  --static --lean dense --graphed --json "$OUT/hf_speed_bf16_b16.json" > "$OUT/hf_speed_bf16_b16.log" 2>&1
stamp "float32 identity of every drafted row with generate() on CUDA (batch 1 and 4)"
timeout 90 python bench/hf_speed.py --device cuda --dtype float32 --batch 1 4 --prompts 4 --repeats 1 \
  --lean dense --graphed --json "$OUT/hf_speed_fp32.json" > "$OUT/hf_speed_fp32.log" 2>&1
stamp done

#!/usr/bin/env bash
# One prepared run on a CPU kind the lean step has not been measured on (issue 37: an Intel CPU
# with AMX, an AVX2-only AMD one): everything its targets are judged on, in one go, then the
# verdicts (bench/cpu_criteria.py). Run it at once on such a machine, from the repository root,
# with the package importable (pip install ".[hf]", or PYTHONPATH=python after `make dev`) and
# the default model fetched or fetchable:
#
#   bash bench/cpu_session.sh [OUT]       # OUT: default bench/results/cpu/DATE-KIND
#
# Resumable: a step whose output is already in OUT is skipped, so a session cut short reruns it
# for the rest (commit OUT between sessions). 7.3 minutes on the 2-core Zen 4, plus 8-10 for
# llama-cpp-python's build where it is not installed (NO_LLAMA=1 skips it, and its rows).
#   1. lscpu                      -> lscpu.txt
#   2. llama-cpp-python           (tools/install_llama_cpp.sh: flags fitted to this CPU)
#   3. the main job, timed        -> demo.json, demo.txt, timings.txt ("main_job SECONDS")
#   4. float32 identity           -> demo_fp32.json (every drafted output against generate()'s)
#   5. lossless sampling, T = 0.7 -> demo_T07.json
#   6. ms per step against nodes  -> step_cost.json (transformers, lean dense/int8/int4, the AMX
#                                    kernel where the CPU has it, llama.cpp)
#   7. AMX CPUs: the main job pinned to the AMX kernel -> demo_amx.json (the main job's own
#      auto took the faster of it and the VNNI kernel by the predicted tokens/s: demo.txt's note)
#   8. the verdicts               -> criteria.md
set -u
kind=avx2
grep -qw avx512f /proc/cpuinfo && kind=avx512
grep -qw amx_bf16 /proc/cpuinfo && kind=amx
OUT=${1:-bench/results/cpu/$(date +%F)-$kind}
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "== $(($(date +%s) - start)) s: $*" | tee -a "$OUT/session.log"; }
demo=(python -c "import sys; from draftlattice.cli.main import main; sys.exit(main())" demo)
done_already() { [ -s "$OUT/$1" ] && stamp "$1 already there: skipped"; }

stamp "CPU: $kind"
done_already lscpu.txt || lscpu > "$OUT/lscpu.txt"
if [ "${NO_LLAMA:-0}" != 1 ] && ! python -c "import llama_cpp" 2> /dev/null; then
  stamp "building llama-cpp-python for this CPU (8-10 min)"
  bash tools/install_llama_cpp.sh > "$OUT/llama_build.log" 2>&1 || stamp "llama-cpp-python build failed (llama_build.log)"
fi
[ "${NO_LLAMA:-0}" = 1 ] && demo+=(--no-llama-cpp)
if ! done_already demo.json; then
  stamp "the main job: draftlattice demo (defaults)"
  begin=$(date +%s)
  timeout 900 "${demo[@]}" --json "$OUT/demo.json" > "$OUT/demo.txt" 2>&1
  echo "main_job $(($(date +%s) - begin))" >> "$OUT/timings.txt"
fi
if ! done_already demo_fp32.json; then
  stamp "float32 identity: draftlattice demo --dtype float32"
  timeout 1200 "${demo[@]}" --dtype float32 --json "$OUT/demo_fp32.json" > "$OUT/demo_fp32.txt" 2>&1
fi
if ! done_already demo_T07.json; then
  stamp "lossless sampling: draftlattice demo --temperature 0.7"
  timeout 900 "${demo[@]}" --temperature 0.7 --json "$OUT/demo_T07.json" > "$OUT/demo_T07.txt" 2>&1
fi
if ! done_already step_cost.json; then
  stamp "ms per step against nodes"
  timeout 1200 python bench/step_cost.py --rounds 5 --nodes 1 2 4 8 16 32 --json "$OUT/step_cost.json" --ways \
    "transformers bf16" "transformers fp32" "lean bf16" "lean fp32" "lean int8" "lean int4" \
    "lean int4, PyTorch's kernel" "lean int4, amx-int8 kernel" "llama.cpp Q4_1" > "$OUT/step_cost.txt" 2>&1
fi
if python -c "from draftlattice import _core; assert 'amx-int8' in _core.lowbit_kernels()" 2> /dev/null &&
  ! done_already demo_amx.json; then
  stamp "the main job on the AMX kernel: draftlattice demo --kernel amx-int8"
  timeout 900 "${demo[@]}" --kernel amx-int8 --json "$OUT/demo_amx.json" > "$OUT/demo_amx.txt" 2>&1
fi
stamp "verdicts"
python bench/cpu_criteria.py "$OUT" --markdown | tee "$OUT/criteria.md"
stamp done

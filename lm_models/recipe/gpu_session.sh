#!/usr/bin/env bash
# One prepared run on a lent GPU machine (no network there): the heads' self-distillation and
# training at a scale the CPU cannot reach, CUDA checks, and the CUDA unit tests. Inputs come in
# .gpu/ (ignored by git; see lm_models/README.md): the GGUF in three pieces, the _core extension
# built for the machine's Python, the gguf wheel, training prompts and held-out prompts.
# Outputs (heads, the distilled corpora as uint16 token ids, logs) go to $OUT.
set -u
export PYTHONUNBUFFERED=1 DRAFTLATTICE_CACHE=/tmp/dlcache
start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - start )) s: $*"; }
# The pieces travel one call each (a call carries at most 64 MiB): earlier calls copied theirs to /tmp/gg.
for part in 00 01 02; do cat ".gpu/gguf.part$part" 2>/dev/null || cat "/tmp/gg/gguf.part$part"; done > /tmp/SmolLM2-135M-Instruct.Q4_1.gguf
sha256sum /tmp/SmolLM2-135M-Instruct.Q4_1.gguf
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH=$PWD/python:/tmp/site
cp .gpu/ext/_core*.so python/draftlattice/
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "import draftlattice, torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.is_available())"
stamp convert
python3 -c "from draftlattice.default_model import fetch_default; print(fetch_default('/tmp/SmolLM2-135M-Instruct.Q4_1.gguf'))" 2>&1 | tail -1
model=/tmp/dlcache/SmolLM2-135M-Instruct
if [ -f .gpu/corpus-greedy.npz ]; then  # a later session: the earlier sessions' greedy corpus, resumed
  python3 lm_models/recipe/corpus_shards.py .gpu/corpus-greedy.npz .gpu/work/distill-greedy --model "$model" --shard 1024
fi
[ -n "${SKIP_CHECKS:-}" ] || (timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_verify_multi_draft.py tests/test_verify_sampling.py \
  tests/test_engine_device.py tests/test_next_token_heads.py -k cuda > /tmp/pytest_cuda.log 2>&1; echo "pytest rc=$?" >> /tmp/pytest_cuda.log) &
stamp recipe
python3 lm_models/recipe/smollm2_heads.py --work .gpu/work --out /tmp/heads_out --model $model \
  --prompts-file .gpu/prompts.json.xz --prompts 40000 --sampled-prompts 20000 --gen-batch 512 \
  --max-new-tokens 192 --horizon 6 --head-hidden 1024 --next-token --draft-vocab 16384 --steps 30000 --sampled-steps 30000 \
  --batch-tokens 65536 --checkpoint-every 100 --distill-seconds ${DISTILL_SECONDS:-170} \
  --train-seconds ${TRAIN_SECONDS:-100} ${RECIPE_ARGS:-} 2>&1 | grep -v -i "warn" | tee /tmp/recipe_out.log | grep -E "shard|step .*(00|50)/|held-out|budget|done|Error|error"
stamp checks
[ -n "${SKIP_CHECKS:-}" ] || timeout 100 python3 bench/cuda_checks.py --model $model --heads /tmp/heads_out/heads --json /tmp/cuda_checks.json 2>&1 | grep -v -i warn | tail -3
wait
cat /tmp/pytest_cuda.log | tail -5
stamp export
mkdir -p $OUT/heads $OUT/heads-sampled
cp /tmp/heads_out/heads/* $OUT/heads/ 2>/dev/null; cp /tmp/heads_out/heads-sampled/* $OUT/heads-sampled/ 2>/dev/null
python3 - <<'PY'
import os, numpy as np
from draftlattice.distilled_corpus import DistilledCorpus
for name in ("greedy", "sampled"):  # only those made (or resumed) here
    try:
        c = DistilledCorpus.load(f".gpu/work/distill-{name}")
    except Exception as e:
        print(name, e); continue
    np.savez_compressed(os.environ["OUT"] + f"/corpus-{name}.npz", tokens=c.tokens.astype(np.uint16),
                        offsets=c.offsets, prompt_lens=c.prompt_lens)
    print(name, len(c), "records", c.generated_tokens, "generated tokens")
PY
cp .gpu/work/accuracy.json /tmp/ 2>/dev/null
tar czf $OUT/logs.tar.gz -C /tmp recipe_out.log pytest_cuda.log cuda_checks.json accuracy.json 2>/dev/null
ls -la $OUT $OUT/heads
stamp done

#!/usr/bin/env bash
# A lent GPU machine (no network, at most 64 MiB carried a call) in two calls, back to back:
#   bash lm_models/recipe/gpu_sampled_heads.sh first    carry .gpu/gguf.A .gpu/ext
#   bash lm_models/recipe/gpu_sampled_heads.sh second   carry .gpu/gguf.B .gpu/ext .gpu/whl
#        .gpu/prompts.json.xz .gpu/init-heads .gpu/work/heldout-prompts.json
# The first call keeps the GGUF's first part in /tmp/gg and runs the CUDA unit tests; the second
# joins the GGUF, converts it, and runs recipe/sampled_heads.py at T (answers sampled at T on the
# GPU, the heads fine-tuned on them). The big tracked files stay here during both calls (moved
# aside) so that a part fits. Outputs: the heads, the T corpus and the held-out corpora as uint16
# token ids (lm_models/recipe/corpus_shards.py lays them out again), the log.
set -u
export PYTHONUNBUFFERED=1 DRAFTLATTICE_CACHE=/tmp/dlcache PYTHONPATH=$PWD/python:/tmp/site
start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - start )) s: $*"; }
cp .gpu/ext/_core*.so python/draftlattice/
if [ "$1" = first ]; then
  mkdir -p /tmp/gg && cp .gpu/gguf.A /tmp/gg/ && ls -la /tmp/gg
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  timeout ${PYTEST_SECONDS:-120} python3 -m pytest -q -p no:cacheprovider -x tests/test_verify_multi_draft.py \
    tests/test_verify_sampling.py tests/test_engine_device.py tests/test_next_token_heads.py -k cuda 2>&1 | tail -15
  stamp first done
  exit 0
fi
T=${T:-0.7}
[ -f /tmp/gg/gguf.A ] || { echo "no /tmp/gg/gguf.A: the machine was not the first call's; run 'first' again"; exit 3; }
cat /tmp/gg/gguf.A .gpu/gguf.B > /tmp/SmolLM2-135M-Instruct.Q4_1.gguf
sha256sum /tmp/SmolLM2-135M-Instruct.Q4_1.gguf
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl
python3 -c "from draftlattice.default_model import fetch_default; print(fetch_default('/tmp/SmolLM2-135M-Instruct.Q4_1.gguf'))" 2>&1 | tail -1
stamp recipe
python3 lm_models/recipe/sampled_heads.py --work /tmp/work --temperature $T --init-heads .gpu/init-heads \
  --prompts-file .gpu/prompts.json.xz --first 20000 --prompts 20000 --heldout-prompts .gpu/work/heldout-prompts.json \
  --heldout-temperatures $T 1.0 --model /tmp/dlcache/SmolLM2-135M-Instruct --gen-batch 512 --max-new-tokens 192 \
  --steps 3000 --batch-tokens 65536 --warmup 30 --checkpoint-every 100 --out /tmp/heads_out \
  --distill-seconds ${DISTILL_SECONDS:-200} --train-seconds ${TRAIN_SECONDS:-130} 2>&1 | grep -v -i warn | tee /tmp/recipe_out.log \
  | grep -E "shard .*(0|5)/|step .*(00|50)/|held-out|budget|distillation|Error|error"
stamp export
mkdir -p $OUT/heads && cp /tmp/heads_out/* $OUT/heads/
python3 - "$T" <<'PY'
import os, sys, numpy as np
from draftlattice.distilled_corpus import DistilledCorpus
for name in (f"distill-t{float(sys.argv[1]):g}", f"heldout-t{float(sys.argv[1]):g}", "heldout-t1"):
    c = DistilledCorpus.load(f"/tmp/work/{name}")
    np.savez_compressed(f"{os.environ['OUT']}/{name}.npz", tokens=c.tokens.astype(np.uint16),
                        offsets=c.offsets, prompt_lens=c.prompt_lens)
    print(name, len(c), "records", c.generated_tokens, "generated tokens")
PY
cp /tmp/work/accuracy-*.json /tmp/work/recipe.log $OUT/
ls -la $OUT $OUT/heads
stamp done

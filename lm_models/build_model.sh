#!/usr/bin/env bash
# Reproduce the default target model (a small Llama with h = 8 blockwise heads trained jointly),
# its tokenizer and the Katz n-gram LMs over its tokens, from the shared data.
#
#   lm_models/build_model.sh [SHARED_DATA_DIR] [WORK_DIR] [OUT_DIR]
#
# SHARED_DATA_DIR  default ../shared/data (wikitext-2/, enwiki-sample/)
# WORK_DIR         default build/default-model: corpus, token caches, the resumable checkpoint
#                  and train.log (run the same command again to resume after a stop)
# OUT_DIR          default lm_models/default-hf (model/ and heads/ folders, curve, log)
#
# Steps: (1) training text = WikiText-2 train + the English Wikipedia sample rewritten in
# WikiText's convention, every 50th sample document held out (recipe/prepare_corpus.py);
# (2) byte-level BPE, 8,192 tokens, special tokens <|endoftext|> and <unk>; (3) Katz 4-gram and
# 2-gram over those tokens on the same text (draftlattice lm build); (4) joint training of trunk
# and heads (recipe/train_default.py; bf16 on CUDA in minutes, or a long resumable CPU job).
# TRAIN_ARGS in the environment is passed to train_default.py (e.g. "--steps 4000 --threads 2").
# Run from the repository root with draftlattice importable (installed, or PYTHONPATH=python).
set -euo pipefail
DATA=${1:-../shared/data}
WORK=${2:-build/default-model}
OUT=${3:-lm_models/default-hf}
PRUNE_4GRAM=${PRUNE_4GRAM:-1200000}
PRUNE_2GRAM=${PRUNE_2GRAM:-200000}
here="$(cd "$(dirname "$0")" && pwd)"
if command -v draftlattice >/dev/null 2>&1; then DL=(draftlattice -v); else DL=(python -m draftlattice.cli.main -v); fi
mkdir -p "$WORK"

[ -s "$WORK/data/train.txt" ] || python "$here/recipe/prepare_corpus.py" "$DATA" "$WORK/data"
[ -s "$WORK/tokenizer.json" ] || "${DL[@]}" tokenizer train "$WORK/data/train.txt" --vocab-size 8192 \
    --special-token '<|endoftext|>' --special-token '<unk>' -o "$WORK/tokenizer.json"

mkdir -p "$OUT"
[ -s "$OUT/katz4.dlm" ] || "${DL[@]}" lm build "$WORK/data/train.txt" --order 4 --tokenizer "$WORK/tokenizer.json" \
    --min-count 1,1,2,4 --prune-to "$PRUNE_4GRAM" -o "$OUT/katz4.dlm"
[ -s "$OUT/katz2.dlm" ] || "${DL[@]}" lm build "$WORK/data/train.txt" --order 2 --tokenizer "$WORK/tokenizer.json" \
    --prune-to "$PRUNE_2GRAM" -o "$OUT/katz2.dlm"

# shellcheck disable=SC2086
python "$here/recipe/train_default.py" --work "$WORK" --valid "$DATA/wikitext-2/valid.txt" --export "$OUT" ${TRAIN_ARGS:-}

#!/usr/bin/env bash
# Rebuild the CURRENTLY SHIPPED tokenizer, blockwise model (lm_models/default) and neural rescorer
# from WikiText-2. They are retired once the transformers-based default of build_model.sh ships.
#
#   lm_models/build_model.sh [CORPUS_DIR] [MINUTES_MODEL] [MINUTES_RESCORER]
#
# CORPUS_DIR holds train.txt, valid.txt, test.txt (default ../shared/data/wikitext-2).
# Training is budgeted in wall-clock minutes (default 55 and 30; the learning-rate schedule
# follows the budget), so the result depends on the machine's speed: the shipped models were
# trained on a shared 2-core CPU (see lm_models/README.md). Uses CUDA when available.
# Run from the repository root.
set -euo pipefail
CORPUS=${1:-../shared/data/wikitext-2}
MINUTES_MODEL=${2:-55}
MINUTES_RESCORER=${3:-30}
OUT=lm_models
export PYTHONPATH=${PYTHONPATH:-python}
DL="python -m draftlattice.cli.main -v"

# 1. Byte-level BPE, 4096 tokens (the n-gram LMs in lm_models/ are built over this file).
$DL tokenizer train "$CORPUS/train.txt" --vocab-size 4096 -o "$OUT/tokenizer.json" --force

# 2. Default model: 4 layers, width 128, h = 8 heads; heads 2..8 scored on 1/4 of the positions.
#    (Width 128, not 256: on the shared 2-core CPU a 256-wide model saw too few tokens in an
#    hour; with a GPU, --d-model 256 --d-ff 1024 --head-hidden 256 and more minutes do better.)
$DL train "$CORPUS/train.txt" --valid "$CORPUS/valid.txt" --tokenizer "$OUT/tokenizer.json" \
    -o "$OUT/default" --n-layer 4 --n-head 4 --d-model 128 --d-ff 512 --num-heads 8 --head-hidden 128 \
    --max-seq-len 512 --seq-len 256 --batch-size 4 --max-steps 100000 --time-budget "$MINUTES_MODEL" \
    --lr 2e-3 --warmup-steps 50 --head-fraction 0.25 --eval-every 100 --eval-windows 16 \
    --threads 2 --seed 1234

# 3. Neural rescorer (Algorithm 2 of Kim et al. 2024): a tiny autoregressive LM, h = 1.
$DL train "$CORPUS/train.txt" --valid "$CORPUS/valid.txt" --tokenizer "$OUT/tokenizer.json" \
    -o "$OUT/neural_rescorer" --n-layer 2 --n-head 2 --d-model 128 --d-ff 512 --num-heads 1 \
    --max-seq-len 512 --seq-len 256 --batch-size 8 --max-steps 100000 --time-budget "$MINUTES_RESCORER" \
    --lr 2e-3 --warmup-steps 50 --eval-every 100 --eval-windows 16 --threads 1 --seed 1234

rm -rf "$OUT/default/checkpoint" "$OUT/neural_rescorer/checkpoint"

# 4. The README's quality figures.
for model in default neural_rescorer; do
    for split in valid test; do
        $DL model perplexity --model "$OUT/$model" --text "$CORPUS/$split.txt" --seq-len 256 --stride 256 --threads 2
    done
done

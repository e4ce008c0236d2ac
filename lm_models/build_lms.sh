#!/usr/bin/env bash
# Rebuilds the shipped default n-gram LMs (lm_models/katz2.dlm, lm_models/katz4.dlm): Katz backoff
# LMs over the default model's BPE tokenizer, trained on WikiText-2 train, with the paper's
# minimum counts (trigrams >= 2, 4-grams >= 4) and relative-entropy pruning to the size budget.
#
# usage: lm_models/build_lms.sh WIKITEXT2_TRAIN_TXT [TOKENIZER_JSON] [OUT_DIR]
#   WIKITEXT2_TRAIN_TXT  e.g. ../shared/data/wikitext-2/train.txt
#   TOKENIZER_JSON       default: lm_models/tokenizer.json
#   OUT_DIR              default: lm_models
# Needs the draftlattice package (the `draftlattice` command, or PYTHONPATH=python after
# `make dev`). Deterministic: the same inputs give byte-identical outputs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
corpus="${1:?usage: $0 WIKITEXT2_TRAIN_TXT [TOKENIZER_JSON] [OUT_DIR]}"
tokenizer="${2:-$here/tokenizer.json}"
out="${3:-$here}"
# Sizes: ~27 bytes per n-gram in .dlm, so 290k n-grams ~ 7.8 MB and 72k ~ 1.9 MB.
PRUNE_4GRAM="${PRUNE_4GRAM:-290000}"
PRUNE_2GRAM="${PRUNE_2GRAM:-72000}"

if command -v draftlattice >/dev/null 2>&1; then
  dl=(draftlattice)
else
  dl=(python -m draftlattice.cli.main)
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The paper's recipe: strip line-edge spaces, drop blank lines (one line = one sentence).
sed -e 's/^ *//' -e 's/ *$//' "$corpus" | grep -v '^$' > "$tmp/train.txt"

"${dl[@]}" lm build "$tmp/train.txt" --order 4 --tokenizer "$tokenizer" --min-count 1,1,2,4 \
  --prune-to "$PRUNE_4GRAM" -o "$out/katz4.dlm" --force
"${dl[@]}" lm build "$tmp/train.txt" --order 2 --tokenizer "$tokenizer" \
  --prune-to "$PRUNE_2GRAM" -o "$out/katz2.dlm" --force
ls -l "$out/katz4.dlm" "$out/katz2.dlm"

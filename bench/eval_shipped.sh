#!/usr/bin/env bash
# Evaluation of the default model (SmolLM2-135M-Instruct with its shipped heads, fetched on first
# use) and the shipped 4-gram on WikiText-2 test and the enwiki sample: record traces once through
# the decoding engine, then replay every analysis (Tables 3/4/5, Figures 6/7, alpha tuning,
# entropy-adaptive drafting). Run from the repository root with draftlattice installed.
#
#   bench/eval_shipped.sh [PROMPTS] [NEW_TOKENS] [DTYPE]     (default 32 prompts x 64 tokens, bfloat16)
set -euo pipefail
N=${1:-32}
M=${2:-64}
DTYPE=${3:-bfloat16}
if command -v draftlattice >/dev/null 2>&1; then DL=(draftlattice); else DL=(python -m draftlattice.cli.main); fi
LM=lm_models/smollm2/katz4.dlm
OUT=bench/results/smollm2/eval
mkdir -p "$OUT"

"${DL[@]}" trace record --wikitext-test "$N" --max-new-tokens "$M" --top-k 16 --dtype "$DTYPE" \
    --threads 2 -o "$OUT/wt2_test.dltrace" --force
"${DL[@]}" eval --trace "$OUT/wt2_test.dltrace" --lm "$LM" --k 16 --p 16 --tune-alpha -o "$OUT/wt2_test_katz4" --force
if [ -f ../shared/data/enwiki-sample/enwiki-sample.txt.xz ]; then
  xz -dc ../shared/data/enwiki-sample/enwiki-sample.txt.xz > "$OUT/enwiki.txt"
  python - "$OUT/enwiki.txt" "$N" <<'PY'
import sys  # keep the first N paragraphs with more than 40 words as prompts
lines = [l for l in open(sys.argv[1], encoding="utf-8") if len(l.split()) > 40][: int(sys.argv[2])]
open(sys.argv[1], "w", encoding="utf-8").writelines(lines)
PY
  "${DL[@]}" trace record --prompts "$OUT/enwiki.txt" --max-new-tokens "$M" --top-k 16 --dtype "$DTYPE" \
      --threads 2 -o "$OUT/enwiki.dltrace" --force
  "${DL[@]}" eval --trace "$OUT/enwiki.dltrace" --lm "$LM" --k 16 --p 16 --tune-alpha -o "$OUT/enwiki_katz4" --force
fi

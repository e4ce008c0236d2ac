#!/usr/bin/env bash
# Evaluation of the shipped model (lm_models/default) on WikiText-2 test and the enwiki sample:
# record traces once, then replay every analysis (Tables 3/4/5, Figures 6/7, alpha tuning,
# entropy-adaptive drafting). Run from the repository root after `make dev`.
#
#   bench/eval_shipped.sh [PROMPTS] [NEW_TOKENS]      (default 64 prompts x 128 tokens)
set -euo pipefail
N=${1:-64}
M=${2:-128}
export PYTHONPATH=${PYTHONPATH:-python}
DL="python -m draftlattice.cli.main"
OUT=bench/results/eval
mkdir -p "$OUT"
NEURAL=()
[ -d lm_models/neural_rescorer ] && NEURAL=(--neural-lm lm_models/neural_rescorer)
$DL trace record --model lm_models/default --wikitext-test "$N" --max-new-tokens "$M" --top-k 16 \
    --threads 2 -o "$OUT/wt2_test.dltrace"
$DL eval --trace "$OUT/wt2_test.dltrace" --lm lm_models/katz4.dlm --k 16 --p 16 --tune-alpha \
    "${NEURAL[@]}" -o "$OUT/wt2_test_katz4"
$DL eval --trace "$OUT/wt2_test.dltrace" --lm lm_models/katz2.dlm --k 16 --p 16 --tune-alpha \
    --no-adaptive -o "$OUT/wt2_test_katz2"
if [ -f ../shared/data/enwiki-sample/enwiki-sample.txt.xz ]; then
  xz -dc ../shared/data/enwiki-sample/enwiki-sample.txt.xz > "$OUT/enwiki.txt"
  python - "$OUT/enwiki.txt" "$N" <<'PY'
import sys  # keep the first N paragraphs with more than 40 words as prompts
lines = [l for l in open(sys.argv[1], encoding="utf-8") if len(l.split()) > 40][: int(sys.argv[2])]
open(sys.argv[1], "w", encoding="utf-8").writelines(lines)
PY
  $DL trace record --model lm_models/default --prompts "$OUT/enwiki.txt" --max-new-tokens "$M" \
      --top-k 16 --threads 2 -o "$OUT/enwiki.dltrace"
  $DL eval --trace "$OUT/enwiki.dltrace" --lm lm_models/katz4.dlm --k 16 --p 16 --tune-alpha \
      "${NEURAL[@]}" -o "$OUT/enwiki_katz4"
fi

"""What ``generate(custom_generate=draftlattice.hf.generate, draft_lm=...)`` pays per call to check
its LM against the model's tokenizer: the hash of the model folder's tokenizer, taken now from the
file's bytes once per version of the file, against the reference of the same run, parsing the
tokenizer to hash it (what every call did before). The default model's folder (fetched on first
use); medians of ``--repeats`` calls after a warm-up.

    python bench/lm_check_cost.py [--repeats 20]
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

from _timing import median_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    from draftlattice.default_model import fetch_default
    from draftlattice.hf import model_tokenizer_sha256
    from draftlattice.tokenizer import folder_tokenizer

    folder = fetch_default()
    model = SimpleNamespace(config=SimpleNamespace(name_or_path=str(folder)))  # what the check reads
    assert model_tokenizer_sha256(model) == folder_tokenizer(folder)[1]
    parse = median_ms(lambda: folder_tokenizer(folder), args.repeats)
    cached = median_ms(lambda: model_tokenizer_sha256(model), args.repeats)
    print(f"tokenizer hash per generate() call, {folder}:")
    print(f"| parsing tokenizer.json (before, reference) | {parse:.2f} ms |")
    print(f"| hash of the file's bytes, once per version (now) | {cached:.3f} ms |")


if __name__ == "__main__":
    main()

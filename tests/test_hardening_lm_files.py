"""Issue 15 item 2: the policy for LM files that change under a loaded model.

A mapped .dlm follows its file (test_hardening_core covers install-by-rename and the SIGBUS of a
truncated mapping); ``copy=True`` reads it into private memory, so in-place rewrites and
truncation cannot reach it; ``changed()`` tells whether the file at the path is still the one
loaded, and a file that changes during the load is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import draftlattice as dl
from draftlattice.ngram import model as model_module

# Two bigram LMs with the same words and n-grams, differing in one probability: their .dlm
# files have the same size, so an in-place rewrite of one with the other keeps the size.
_ARPA = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-1.0 <s> -0.3
-1.0 </s>
-0.5 1 -0.2
-{p} 2 -0.2

\\2-grams:
-0.2 <s> 1
-0.4 1 2

\\end\\
"""
_TOKENS = [1, 2, 2, 1]


def _dlm(tmp_path, name, p):
    arpa = tmp_path / f"{name}.arpa"
    arpa.write_text(_ARPA.format(p=p))
    out = tmp_path / f"{name}.dlm"
    dl.NgramLM(arpa).save(out)
    return out


@pytest.fixture
def two_models(tmp_path):
    a, b = _dlm(tmp_path, "a", "0.7"), _dlm(tmp_path, "b", "1.9")
    assert a.stat().st_size == b.stat().st_size
    # An old modification time, so any later write changes it whatever the clock's granularity.
    os.utime(a, ns=(10**18, 10**18))
    return a, b


_CHILD = textwrap.dedent("""
    import sys, numpy as np, draftlattice as dl
    path, replacement, mode, copy = sys.argv[1:5]
    lm = dl.NgramLM(path, copy=copy == "copy")
    before = lm.token_scores([1, 2, 2, 1])
    with open(path, "r+b") as f:  # in place, as `cp` does: the same inode
        if mode == "rewrite":
            f.write(open(replacement, "rb").read())
        f.truncate(0 if mode == "truncate" else f.tell())
    after = lm.token_scores([1, 2, 2, 1])
    print("same" if np.array_equal(before, after) else "changed", lm.changed())
""")


def _run_child(a, b, mode, copy):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(a), str(b), mode, copy], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize("mode", ["rewrite", "truncate"])
def test_copy_survives_in_place_rewrite_and_truncation(two_models, mode):
    result = _run_child(*two_models, mode, "copy")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["same", "True"]


def test_mapped_model_follows_an_in_place_rewrite(two_models):
    # The hazard copy=True exists for: a same-size rewrite silently changes a mapped model's
    # scores (and changed() is how a caller finds out).
    result = _run_child(*two_models, "rewrite", "map")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["changed", "True"]


def test_copy_scores_like_the_mapping(two_models):
    a, _ = two_models
    mapped, copied = dl.NgramLM(a), dl.NgramLM(a, copy=True)
    assert mapped.mapped and not copied.mapped
    np.testing.assert_array_equal(mapped.token_scores(_TOKENS), copied.token_scores(_TOKENS))
    assert not dl.NgramLM(a.with_suffix(".arpa"), copy=True).mapped  # ARPA: always private
    assert copied.with_vocab(None).mapped is False


@pytest.mark.parametrize("change", ["cp_over", "truncate", "append", "replace_by_rename", "delete"])
def test_changed_sees_the_file_at_the_path_change(two_models, change):
    a, b = two_models
    lm = dl.NgramLM(a, copy=True)
    assert not lm.changed()
    assert not lm.with_vocab(None).changed()
    if change == "cp_over":
        shutil.copyfile(b, a)  # same size, same inode, new content
    elif change == "truncate":
        os.truncate(a, 0)
    elif change == "append":
        with open(a, "ab") as f:
            f.write(b"\0" * 8)
    elif change == "replace_by_rename":
        os.replace(b, a)
    else:
        os.remove(a)
    assert lm.changed()
    assert lm.with_vocab(None).changed()


def test_changed_does_not_read_the_content(two_models):
    # Documented limit: a same-size rewrite that restores the modification time is not seen.
    a, b = two_models
    lm = dl.NgramLM(a, copy=True)
    shutil.copyfile(b, a)
    os.utime(a, ns=(10**18, 10**18))
    assert not lm.changed()


def test_a_file_that_changes_during_the_load_is_refused(two_models, monkeypatch):
    a, _ = two_models
    identities = iter([(1, 2, 3, 4), (1, 2, 3, 5)])  # before and after the load
    monkeypatch.setattr(model_module, "_file_identity", lambda path: next(identities))
    with pytest.raises(dl.FormatError, match="changed while it was being loaded"):
        dl.NgramLM(a)

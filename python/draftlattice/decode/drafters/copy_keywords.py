"""The copied draft that the plug-in's ``draft_lookup`` keywords ask for, checked keyword by keyword.

:func:`draftlattice.hf.generate` builds its drafter from ``draft_*`` keywords. This module holds
the part that concerns the context's copy and the datastore (``draft_lookup``,
``draft_lookup_tokens``, ``draft_datastore``, ``draft_retrieval``): a bad value is refused with
the keyword the user passed, before any forward runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...datastore import Datastore
from .lookup import ContextLookup


@dataclass(frozen=True)
class CopyKeywords:
    """``draft_lookup`` (longest context n-gram matched, 0: no copy), ``draft_lookup_tokens``,
    ``draft_datastore`` and ``draft_retrieval``, as passed."""

    lookup: int
    tokens: int
    datastore: object = None
    retrieval: int = 0

    def check(self, do_sample: bool, sample_rule: str) -> None:
        """The keywords' combinations that cannot work (ValueError naming them)."""
        if self.datastore is not None and not self.lookup:
            raise ValueError(
                "draft_datastore fills in the copied draft where the context has none: it needs draft_lookup"
            )
        if self.retrieval and self.datastore is None:
            raise ValueError(
                "draft_retrieval drafts the datastore's continuation beside the copy: it needs draft_datastore"
            )
        if self.retrieval and do_sample and sample_rule != "tree":
            raise ValueError(
                "draft_retrieval adds a deterministic draft: with do_sample=True use draft_sample='tree' "
                f"(got {sample_rule!r})"
            )

    def alone(self, lm, verify: str, do_sample: bool, sample_rule: str = "tree") -> ContextLookup:
        """draft_heads=None: the context's copy is the only draft (greedy, or the tree rule)."""
        if do_sample and sample_rule != "tree":
            raise ValueError(
                "draft_heads=None with draft_lookup drafts the context's copy alone: with do_sample=True "
                f"use draft_sample='tree' (got {sample_rule!r}); plain sampling on a lean step: draft_step "
                "without draft_lookup"
            )
        if lm is not None:
            raise ValueError("draft_lm rescores the heads' lattice: it needs draft_heads")
        if verify != "tree":
            raise ValueError(f"draft_heads=None verifies the copy as a token tree: draft_verify='tree', not {verify!r}")
        return self.joined(None, "tree", do_sample)

    def joined(self, drafter, sample_rule: str, do_sample: bool) -> ContextLookup:
        """``drafter``'s drafts and the context's copy."""
        if do_sample and sample_rule not in ("tree", "multi"):
            raise ValueError(
                f"draft_lookup joins several drafts: with do_sample=True use draft_sample='tree' or 'multi' "
                f"(got {sample_rule!r})"
            )
        store = self.datastore
        if store is not None and not isinstance(store, Datastore):
            raise ValueError(f"draft_datastore must be a draftlattice.Datastore, got {type(store).__name__}")
        for keyword, length in (("draft_lookup_tokens", self.tokens), ("draft_retrieval", self.retrieval)):
            if store is not None and isinstance(length, int) and store.max_length < length:
                raise ValueError(
                    f"draft_datastore drafts at most {store.max_length} tokens (its max_length), "
                    f"fewer than {keyword}={length}"
                )
        try:
            return ContextLookup(drafter, self.lookup, self.tokens, store, self.retrieval)
        except ValueError as error:  # name the keywords the user passed
            message = str(error).replace("max_ngram", "lookup").replace("length must", "lookup_tokens must")
            raise ValueError(f"draft_{message}") from None


#: No copy ever: plain decoding steps on the plug-in's ``draft_step`` without heads.
NO_COPY = CopyKeywords(lookup=1, tokens=0)

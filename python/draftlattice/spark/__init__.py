"""N-gram LM building on Apache Spark, identical to the one-machine trainer (docs/SCALE.md).

``build_lm`` counts, estimates (Katz, as OpenGrm's ngrammake) and prunes (relative entropy, as
ngramshrink) with Spark jobs and writes the same ``.arpa``/``.dlm`` as
:func:`draftlattice.ngram.build.build_lm` on the same corpus and options. Needs the ``spark`` extra
(pyspark) and a Java runtime.
"""

from __future__ import annotations

from .build import build_lm

__all__ = ["build_lm"]

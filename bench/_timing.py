"""What the benchmarks share for timing a call: one warm-up, then the median of timed repeats."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_ms(fn: Callable[[], object], repeats: int = 3) -> float:
    """Milliseconds per call of ``fn``: the median of ``repeats`` timed calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)

"""The Spark context a build runs in, and the translation of executor errors.

A build either uses the caller's ``SparkSession``/``SparkContext`` (left running) or starts its
own with ``master`` (``local[*]`` by default) and stops it at the end. Settings that only take
effect at JVM start (``spark.driver.memory``, ``spark.executor.memory``, ...) go in
``spark_conf`` or on the ``spark-submit`` command line (docs/SCALE.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._core import FormatError
from .corpus import ERROR_TAG

logger = logging.getLogger(__name__)

__all__ = ["java_version", "local_worker_settings", "spark_context", "translate_executor_errors"]


def java_version() -> str | None:
    """The first line of ``java -version``, or None when no Java runtime is found."""
    import shutil
    import subprocess

    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if java is None or not os.path.exists(java):
        return None
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if done.returncode == 0 and lines else None


def local_worker_settings() -> dict[str, str]:
    """Settings that make local-mode Python workers import this very draftlattice.

    Local workers run the driver's Python with the package directory that holds the imported
    draftlattice (site-packages, or a built source checkout) first on their path; on a cluster,
    ``spark.pyspark.python`` and the executors' environment name theirs instead."""
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [package_root, os.environ.get("PYTHONPATH", "")]
    return {
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(p for p in paths if p),
    }


def _import_pyspark():
    try:
        import pyspark
    except ImportError:
        raise ImportError(
            "the Spark engine needs pyspark and a Java runtime (17 or 21): pip install 'draftlattice[spark]'"
        ) from None
    return pyspark


@contextlib.contextmanager
def spark_context(spark: Any = None, master: str | None = None, conf: Mapping[str, str] | None = None) -> Iterator[Any]:
    """Yields a SparkContext: ``spark``'s (a SparkSession or SparkContext), the process's
    running one (one JVM holds one context; ``master`` and ``conf`` are then ignored), or a new
    one, stopped on exit."""
    if spark is not None:
        yield getattr(spark, "sparkContext", spark)
        return
    pyspark = _import_pyspark()
    running = pyspark.SparkContext._active_spark_context
    if running is not None:
        logger.info("using the running Spark context (master %s)", running.master)
        yield running
        return
    if java_version() is None:
        raise FileNotFoundError("the Spark engine needs a Java runtime (17 or 21) on PATH; `java -version` failed")
    settings = {
        "spark.app.name": "draftlattice lm build",
        "spark.ui.showConsoleProgress": "false",
    }
    settings.update(conf or {})
    spark_conf = pyspark.SparkConf().setAll(list(settings.items()))
    spark_conf.setMaster(master or spark_conf.get("spark.master", "local[*]"))
    if spark_conf.get("spark.master", "").startswith("local"):
        for key, value in local_worker_settings().items():
            spark_conf.setIfMissing(key, value)
    context = pyspark.SparkContext(conf=spark_conf)
    try:
        yield context
    finally:
        context.stop()


_TAGGED = re.compile(re.escape(ERROR_TAG) + r"(\w+): ([^\n]*)")


@contextlib.contextmanager
def translate_executor_errors() -> Iterator[None]:
    """Re-raises a corpus error from an executor as the exception the one-machine build raises."""
    try:
        yield
    except Exception as error:
        match = _TAGGED.search(str(error))
        if match is None:
            raise
        kind, message = match.groups()
        raise (OSError if kind == "OSError" else FormatError)(message) from None

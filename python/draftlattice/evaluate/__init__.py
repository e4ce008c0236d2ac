"""Evaluation: decoding traces (record once, replay many drafters exactly), block-efficiency
metrics, the paper's analyses and their report.

Modules in data-flow order: ``prompts`` (prompts from text) -> ``record`` (greedy decoding that
keeps every head's top-K) -> ``trace`` (the file format) -> ``drafting`` / ``replay`` (drafters on
a trace) -> ``metrics``, ``analyses``, ``adaptive`` -> ``report`` (tables, JSON, figures).
"""

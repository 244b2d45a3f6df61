"""Faithfulness worker: HHEM-2.1-Open scores of sampled traces (docs/architecture.md, "Definitions").

loader and checkpoint read the model without trust_remote_code; encoder and
kernels run it; premise and sentences shape the pairs; sampling and plan
decide what is scored; scorer batches the pairs; processor counts (metrics)
and emits (events).
"""

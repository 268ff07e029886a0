"""Speed and memory benchmarks of the harness (``python -m benchmarks``), run by hand or nightly.

Never timed unit tests: each benchmark prints its figure last and appends one JSON line to
``benchmarks/results/<name>.jsonl`` so trends can be compared. See docs/performance.md.
"""

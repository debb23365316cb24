"""The hot path: hooks that read the clock and append events (docs/design/hot-path.md).

Nothing here imports the reducer (``collect/reduce``) or the samplers (``collect/sampling``).
"""

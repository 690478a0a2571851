"""autoresearch: a deterministic engine for autonomous experiment loops.

The engine runs a benchmark, parses METRIC lines, decides keep or discard in code,
commits or rolls back with git, and appends every result to an append-only log.
Standard library only: it must start in milliseconds with any python3 >= 3.10.
"""

__version__ = "0.1.0"

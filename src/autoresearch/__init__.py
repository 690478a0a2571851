"""autoresearch: a deterministic engine for autonomous experiment loops.

The engine runs a benchmark, parses METRIC lines, decides keep or discard in code,
commits or rolls back with git, and appends every result to an append-only log.
Standard library only: it must start in milliseconds with any python3 >= 3.10.
"""

__version__ = "0.1.0"

import os as _os

# Where the package is, for the places that start the engine again in another process (night's
# tmux window, the pool runner and its workers, the demo) and for its static files.
PACKAGE_DIR = _os.path.dirname(_os.path.abspath(__file__))
SRC_DIR = _os.path.dirname(PACKAGE_DIR)

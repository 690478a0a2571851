"""`init` (a research repo and a segment of the log) and `demo` (the whole loop on a scratch repo)."""

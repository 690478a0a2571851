"""Where a benchmark runs: a snapshot of its commit, a contained process group with bounded output,
the Landlock sandbox, and the stall watch over its steps file. Imports store only."""

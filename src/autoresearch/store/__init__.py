"""The research repo's stored truth: the log and its hash chain, git, the engine's state beside the log,
results waiting to be appended, the cost ledger, the night log, and the guard that checks all of it around
a run. Imports only the standard library and the package's top level (cli, errors, output)."""

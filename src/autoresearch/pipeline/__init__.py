"""One experiment, step by step: plan (refuse or say what to measure), measure (run the benchmark),
verdict (decide), record (append and reset); recovery finishes a run whose engine died; the seam to the
diagnoser. Imports store, decision and isolation; never the pool or the night."""

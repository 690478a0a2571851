"""What the log means: the decision rule (decide), the one summary every view reads (summary, kept
between commands by logcache) and the hidden holdout's reading. Imports store only."""

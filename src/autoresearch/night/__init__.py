"""`autoresearch night` (the agent's whole night in tmux) and `stop`/`resume` of the session the hooks keep
alive. Optional: nothing below the command edge imports it."""

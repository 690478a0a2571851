"""`pool`, `submit`, `wait`: experiments in waves on Ray. Optional: only pool_runner and pool_task import
Ray, and nothing below the command edge imports this room."""

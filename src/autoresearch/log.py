"""The append-only experiment log `autoresearch.jsonl` (DESIGN 4.2).

One JSON object per line. A line is written whole or not at all: each record is one
os.write() of the full line on an O_APPEND descriptor, followed by fsync. If a crash left
a torn last line, the next append starts on a fresh line so the torn one stays isolated
and every reader skips it with a warning.
"""

import json
import os
import sys

LOG_NAME = "autoresearch.jsonl"


def append(path, record):
    """Append one record (a dict) as a JSON line, durably."""
    line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
    data = line.encode("utf-8")
    # O_RDWR, not O_WRONLY: the torn-line check reads the last byte with pread.
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if _ends_without_newline(fd):
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _ends_without_newline(fd):
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    return os.pread(fd, 1, size - 1) != b"\n"


def read(path, warn=None):
    """Return the list of records in the log, skipping malformed lines.

    `warn` is called with one message per skipped line (default: print to stderr).
    A missing log reads as empty.
    """
    if warn is None:
        warn = _warn_stderr
    records = []
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return records
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            warn(f"{os.path.basename(path)}:{number}: skipped malformed line ({exc.__class__.__name__}: {exc})")
            continue
        if not isinstance(record, dict):
            warn(f"{os.path.basename(path)}:{number}: skipped line that is not a JSON object")
            continue
        records.append(record)
    return records


def _warn_stderr(message):
    print(f"autoresearch: warning: {message}", file=sys.stderr)


def is_config(record):
    return record.get("type") == "config"


def is_run(record):
    return "run" in record and record.get("type") in (None, "run")


def segments(records):
    """Split records into segments: a list of (config, runs), one per config header.

    Runs before any header (a hand-made log) form a segment with config None.
    """
    result = []
    for record in records:
        if is_config(record):
            result.append((record, []))
        elif is_run(record):
            if not result:
                result.append((None, []))
            result[-1][1].append(record)
    return result

"""The engine's one atomic writer, and the tolerant readers beside it.

A reader of a file the engine writes (session.json, current.json, a run's diagnosis, the
report) sees the old file or the new one, never half of one: the data goes to a temporary
file in the same folder, is flushed to disk, and is renamed over the target.
"""

import json
import os


def write_atomic(path, data, durable=True, mode=0o644):
    """Write `data` (bytes or text) to `path` atomically; nothing is left behind on failure.
    `durable` flushes it to disk before the rename; `mode` is the new file's permissions."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = os.fspath(path)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json_atomic(path, data):
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def read_json(path):
    """The JSON object in `path`, or None when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_text(path):
    """The file as text (undecodable bytes replaced), or "" when it is missing."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""

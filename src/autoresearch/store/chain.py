"""The log's hash chain: records the engine did not write do not count.

Every line the engine appends to `autoresearch.jsonl` carries `"prev"`: the hash of the line
the engine wrote before it (`GENESIS` for the first line of a log). The hash of the last line
it wrote, the chain's **tip**, is kept in the git directory (`.git/autoresearch/tip.json`),
with a copy of the whole log beside it (`.git/autoresearch/log.jsonl`, appended with
every record). Readers follow the chain back from the tip: a line off it (appended, inserted
or edited by anything but the engine) is reported with its line number and ignored, never
taken as a run or a header. A log that no longer holds the tip (cut, truncated, replaced) is
read from the engine's copy instead, and the next append puts the log back as the engine
wrote it (what it replaces is saved under `.autoresearch/foreign/`).

A log without a tip (made by hand, by an older engine, or outside a git work tree) is read
as it is: nothing tells engine lines from others there.

Appending writes the tip first ({hash of the new line, the tip before it, the log size after
it}), then the line, then the copy: a kill between the steps leaves either a tip whose line
never came (the tip before it still names the end) or a copy one line behind (refreshed from
the log at the next append). Nothing here imports the rest of the engine: standard library.
"""

import hashlib
import json
import os
import time
from dataclasses import dataclass, field

from autoresearch.store.files import write_atomic

FIELD = "prev"
GENESIS = "0" * 32
STATE = "autoresearch"
TIP = "tip.json"
COPY = "log.jsonl"        # the engine's copy of the log (not named like a log: tools look for that name)
FOREIGN = os.path.join(".autoresearch", "foreign")


def line_hash(line: bytes) -> str:
    """Hash of one log line, without its newline (128 bits of sha256, hex)."""
    return hashlib.sha256(line.rstrip(b"\r\n")).hexdigest()[:32]


def git_dir(root):
    """The git directory of the work tree at `root` (a linked worktree's own), or None."""
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        return dot
    try:
        with open(dot, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    path = text[len("gitdir:"):].strip()
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(root, path))


def state_dir(log_path):
    """Where the tip and the copy of this log live, or None when the log is not chained
    (not the log at the root of a git work tree)."""
    log_path = os.path.abspath(log_path)
    if os.path.basename(log_path) != "autoresearch.jsonl":
        return None
    gd = git_dir(os.path.dirname(log_path))
    return os.path.join(gd, STATE) if gd else None


@dataclass
class Tip:
    hash: str
    before: str
    size: int

    @staticmethod
    def read(folder):
        try:
            with open(os.path.join(folder, TIP), encoding="utf-8") as f:
                data = json.load(f)
            return Tip(str(data["hash"]), str(data["before"]), int(data["size"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, folder):
        os.makedirs(folder, exist_ok=True)
        write_atomic(os.path.join(folder, TIP),
                     json.dumps({"hash": self.hash, "before": self.before, "size": self.size}).encode() + b"\n")


@dataclass
class Verdict:
    """What a chain check found: the line numbers that count, and the ones that do not."""
    accepted: set                      # 1-based line numbers on the chain (all of them when unchained)
    foreign: list = field(default_factory=list)   # (line number, why) of lines off the chain
    chained: bool = True               # False: no tip, the log is read as it is
    intact: bool = True                # False: the log does not hold the tip (cut or replaced)
    end: int = 0                       # line number of the tip's line (0: none)


def verify(entries, tip):
    """Check `entries` ([(line number, raw line, record dict)], the log's parsed records in order)
    against `tip`. Lines that are not records (malformed ones) are the caller's business."""
    if tip is None:
        return Verdict({n for n, _, _ in entries}, chained=False)
    hashes = [line_hash(raw) for _, raw, _ in entries]
    position = {}
    for i, h in enumerate(hashes):
        position.setdefault(h, []).append(i)
    end = _find(position, tip.hash, len(entries))
    if end is None and tip.before != GENESIS:
        end = _find(position, tip.before, len(entries))
    if end is None:
        if tip.before == GENESIS and not entries:   # the first append never came: an empty chain
            return _verdict(entries, set(), None)
        return Verdict(set(), [], intact=False)
    on_chain = set()
    i = end
    while True:
        on_chain.add(i)
        prev = entries[i][2].get(FIELD)
        if prev == GENESIS:
            break
        if not isinstance(prev, str):
            # An unchained record (the log predates the chain): it and every unchained record
            # before it count, as they did before the engine chained the log.
            on_chain.update(j for j in range(i) if FIELD not in entries[j][2])
            break
        j = _find(position, prev, i)
        if j is None:
            return Verdict(set(), [], intact=False)
        i = j
    return _verdict(entries, on_chain, end)


def _find(position, h, before):
    """Index of the last line with hash `h` before index `before`, or None."""
    best = None
    for i in position.get(h, ()):
        if i < before:
            best = i
    return best


def _verdict(entries, on_chain, end):
    accepted = {entries[i][0] for i in on_chain}
    foreign = [(n, "not written by the engine (off the log's hash chain)")
               for i, (n, _, _) in enumerate(entries) if i not in on_chain]
    return Verdict(accepted, foreign, end=entries[end][0] if end is not None else 0)


# --- appending ---

def link(log_path, record, warn=None):
    """Prepare `record` for appending to the log at `log_path`: set its `prev` (in place, so the
    caller holds the record as written), repair the log first if something else changed it.
    Returns (record, folder); folder is None for an unchained log. Then `begin`, write the
    line, `copy_append`."""
    folder = state_dir(log_path)
    if folder is None:
        return record, None
    tip = Tip.read(folder)
    size = _size(log_path)
    copy = os.path.join(folder, COPY)
    if size is None:
        # A new log (init, or the old one moved aside): a new chain; the old copy is kept aside.
        if os.path.exists(copy):
            os.replace(copy, f"{copy}.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}")
        prev = GENESIS
    elif tip is None:
        prev = _legacy_prev(log_path)
        _sync_copy(log_path, copy)
    else:
        prev, clean = _chain_end(log_path, tip, size)
        if prev is None or not clean:
            repair(log_path, warn)
            prev, clean = _chain_end(log_path, tip, _size(log_path) or 0)
        if prev is None:
            # Neither the log nor the copy holds the tip: continue from the log's own end.
            prev = _legacy_prev(log_path)
            (warn or _quiet)("autoresearch.jsonl and the engine's copy both lost the last record "
                             "the engine wrote; the chain continues from the log's last line")
        _sync_copy(log_path, copy)
    record[FIELD] = prev
    return record, folder


def begin(folder, line, before, size_after):
    """Step 1 of an append: name the line about to be written as the tip."""
    Tip(line_hash(line), before, size_after).write(folder)


def copy_append(folder, data):
    """Step 3 of an append: the same bytes into the engine's copy (a failure is repaired later)."""
    path = os.path.join(folder, COPY)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(fd, data)   # no fsync: a copy that lags is refreshed from the log at the next append
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _chain_end(log_path, tip, size):
    """(hash the next line links to, whether the log holds only chained lines); the hash is None
    when the log does not hold the tip (it needs `repair`)."""
    if tip.size == size:
        last = _line_before(log_path, size)
        if last is not None and line_hash(last) == tip.hash:
            return tip.hash, True
    entries = _entries(log_path)
    verdict = verify(entries, tip)
    if not verdict.intact:
        return None, False
    if not verdict.end:
        return GENESIS, not verdict.foreign
    raw = next(raw for n, raw, _ in entries if n == verdict.end)
    return line_hash(raw), not verdict.foreign


def _legacy_prev(log_path):
    last = _line_before(log_path, _size(log_path) or 0)
    return line_hash(last) if last else GENESIS


def repair(log_path, warn=None):
    """Make the log what the engine wrote: when it differs from the engine's copy and the copy
    holds the tip, the log is saved under .autoresearch/foreign/ and replaced by the copy.
    Returns True when the log was replaced."""
    folder = state_dir(log_path)
    if folder is None:
        return False
    tip = Tip.read(folder)
    copy = os.path.join(folder, COPY)
    if tip is None or not os.path.exists(copy):
        return False
    try:
        with open(copy, "rb") as f:
            good = f.read()
    except OSError:
        return False
    try:
        with open(log_path, "rb") as f:
            live = f.read()
    except FileNotFoundError:
        live = None
    if live == good or not verify(_parse(good), tip).intact:
        return False
    root = os.path.dirname(os.path.abspath(log_path))
    if live:
        aside = os.path.join(root, FOREIGN, f"autoresearch.jsonl.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}")
        os.makedirs(os.path.dirname(aside), exist_ok=True)
        with open(aside, "wb") as f:
            f.write(live)
        where = f"; what it held is in {os.path.relpath(aside, root)}"
    else:
        where = ""
    write_atomic(log_path, good)
    (warn or _quiet)(f"autoresearch.jsonl was changed outside the engine; put it back as the engine "
                     f"wrote it{where}")
    return True


def read_copy(log_path):
    """The engine's copy of the log (bytes), or None."""
    folder = state_dir(log_path)
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, COPY), "rb") as f:
            return f.read()
    except OSError:
        return None


def _sync_copy(log_path, copy):
    """Bring the copy up to the log when it lags (an append whose copy step failed)."""
    live_size, copy_size = _size(log_path) or 0, _size(copy)
    if copy_size == live_size:
        return
    with open(log_path, "rb") as f:
        live = f.read()
    try:
        write_atomic(copy, live)
    except OSError:
        pass  # tried again at the next append


def _size(path):
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def _line_before(path, offset):
    """The line that ends at byte `offset` (a log whose last byte before it is a newline)."""
    if offset <= 0:
        return None
    with open(path, "rb") as f:
        start = max(0, offset - 65536)
        f.seek(start)
        chunk = f.read(offset - start)
    if not chunk.endswith(b"\n"):
        return None
    body = chunk[:-1]
    cut = body.rfind(b"\n")
    if cut < 0 and start > 0:
        return None  # a line longer than the window: take the slow path
    return body[cut + 1:]


def _entries(log_path):
    try:
        with open(log_path, "rb") as f:
            return _parse(f.read())
    except FileNotFoundError:
        return []


def _parse(raw):
    """[(line number, raw line, record)] for the lines of `raw` that are JSON objects."""
    entries = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            entries.append((number, line, record))
    return entries


def _quiet(message):
    pass

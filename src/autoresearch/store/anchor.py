"""The engine's state outside the research repo: the chain's anchor, waiting results, the holdout.

The log's hash chain (chain.py) keeps its tip in the git directory, which a tool run in the
repo can rewrite: a log rewritten and re-chained, with a new tip and a new engine copy, reads
as genuine there. The anchor is the same tip kept where neither the agent's sandbox nor the
benchmark's can write (nor, for the benchmark, read): the user's state folder,
`$XDG_STATE_HOME/autoresearch/<repo-id>/` (default `~/.local/state/autoresearch/`).

- `anchor.json`: {log, hash, before, size, count, updated}: the hash of the last line the engine
  appended, the one before it, the log's size after it and how many records the chain held.
  It is written on every append, before the tip (a kill between the steps leaves an anchor one
  line ahead: its `before` names the line that is there).
- `pending/N.json`: results measured but not yet appended (pending.py); there a tool in the repo
  cannot forge one for the engine to append.
- `holdout/N.json`: the hidden holdout of each run (holdout.py), out of the benchmark's reach.

The repo-id is the work tree's real path (its last part, readable, and 16 hex digits of its
sha256): each work tree (a linked worktree too) has its own log. A repository moved or cloned
to a new place, a new machine, or a log written by an older engine has no anchor yet: `status`
says so and the next append starts one from the log as it is then. A new log (the old one moved
aside, then `init`) starts a new anchor; the old one is kept beside it.

`check()` compares the chain with the anchor (status, verify, and preflight before a run): a
disagreement means the log or the engine's state in `.git` was rewritten outside the engine;
runs are refused until a person looks. Standard library only (imports chain.py and files.py).
"""

import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass

from autoresearch import errors
from autoresearch.store import chain
from autoresearch.store.files import write_atomic

ANCHOR = "anchor.json"
STATE_VAR = "XDG_STATE_HOME"


def home():
    """The engine's state folder for all repos: $XDG_STATE_HOME/autoresearch, else
    ~/.local/state/autoresearch (a relative XDG_STATE_HOME is ignored, as the spec says)."""
    base = os.environ.get(STATE_VAR, "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "autoresearch")


def repo_id(root):
    real = os.path.realpath(root)
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", os.path.basename(real))[:40] or "root"
    return f"{name}-{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"


def folder(root, make=False):
    """This work tree's folder in the state folder (made, private to the user, with `make`)."""
    path = os.path.join(home(), repo_id(root))
    if make:
        os.makedirs(path, mode=0o700, exist_ok=True)
    return path


@dataclass
class Anchor:
    log: str
    hash: str
    before: str
    size: int
    count: int
    updated: float = 0.0

    @staticmethod
    def read(root):
        try:
            with open(os.path.join(folder(root), ANCHOR), encoding="utf-8") as f:
                data = json.load(f)
            return Anchor(str(data["log"]), str(data["hash"]), str(data["before"]), int(data["size"]),
                          int(data["count"]), float(data.get("updated") or 0))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, root):
        path = os.path.join(folder(root, make=True), ANCHOR)
        write_atomic(path, json.dumps(asdict(self)).encode("utf-8") + b"\n", mode=0o600)


class Disagrees(errors.Refused, OSError):
    """The log's chain is not the one the anchor names: the engine will not append to it. A
    refusal (one line, exit 3) and an OSError (a measured result then waits, pending.py)."""


def advance(log_path, line, before, size_after, fresh=False):
    """Step 0 of an append (before the tip): name the line about to be written. `fresh`: the log
    did not exist before this append (a new log begins a new chain). Raises Disagrees when the
    chain the line continues is not the anchor's."""
    root = os.path.dirname(os.path.abspath(log_path))
    current = Anchor.read(root)
    if current is None:
        count = _records_on_chain(log_path, before)
    elif before == chain.GENESIS and fresh:
        _set_aside(root)   # a new log: a new chain, a new anchor
        count = 0
    elif before == current.hash:
        count = current.count
    elif before == current.before:   # the anchor's line never came (killed between the steps)
        count = current.count - 1
    else:
        raise Disagrees(f"the log disagrees with the engine's anchor: {describe(current)}; "
                        f"the record was not appended. {ADVICE.format(path=anchor_path(root))}")
    Anchor(os.path.abspath(log_path), chain.line_hash(line), before, size_after, count + 1, time.time()).write(root)


ADVICE = ("The log or the engine's state in .git was rewritten outside the engine: its records are not to "
          "be trusted, and runs are refused until a person looks (`autoresearch verify`). If the change was "
          "yours (a log restored from a backup), remove {path} and the next run starts a new anchor")


def anchor_path(root):
    return os.path.join(folder(root), ANCHOR)


def describe(a):
    return f"its last record has hash {a.hash[:12]} (record {a.count} of the chain)"


def _set_aside(root):
    path = anchor_path(root)
    try:
        os.replace(path, f"{path}.{time.strftime('%Y%m%d-%H%M%S')}")
    except OSError:
        pass


def _records_on_chain(log_path, end_hash):
    """How many records the chain ending at `end_hash` holds (an anchor starts on a log that
    has one already)."""
    if end_hash == chain.GENESIS:
        return 0
    folder_ = chain.state_dir(log_path)
    entries = chain._entries(log_path)
    tip = chain.Tip.read(folder_) if folder_ else None
    verdict = chain.verify(entries, tip)
    return len(verdict.accepted) if verdict.intact else len(entries)


@dataclass
class Finding:
    state: str          # "agrees", "disagrees", "none" (no anchor yet), "unchained" (no chain to anchor)
    text: str = ""
    path: str = ""

    def to_json(self):
        return asdict(self)


def check(root, log_path):
    """How the log's chain stands against the anchor (a Finding). Reads two small files and the
    log's last line; the whole log only when the last line is not the anchor's."""
    state_folder = chain.state_dir(log_path)
    path = anchor_path(root)
    if state_folder is None or not os.path.exists(log_path):
        return Finding("unchained", path=path)
    a = Anchor.read(root)
    if a is None:
        return Finding("none", f"anchor: none for this log on this machine yet ({path}): a new clone or "
                               "machine, a moved repository or a log from an older engine; the next run starts one",
                       path)
    tip = chain.Tip.read(state_folder)
    if tip is None or tip.hash not in (a.hash, a.before):
        found = "is missing" if tip is None else f"names the record with hash {tip.hash[:12]}"
        return _disagrees(a, path, f"the chain's tip in .git/autoresearch {found}")
    if _holds(log_path, tip) or _holds_copy(log_path, tip):
        return Finding("agrees", f"anchor: the log agrees with the engine's anchor ({a.count} records)", path)
    return _disagrees(a, path, "neither the log nor the engine's copy holds that record")


def _disagrees(a, path, detail):
    return Finding("disagrees", f"WARNING: the log disagrees with the engine's anchor ({path}): {describe(a)}, "
                                f"but {detail}. {ADVICE.format(path=path)}", path)


def _holds(log_path, tip):
    """True when the log holds the record the tip names (the anchor's own, or the one before it
    when the engine stopped between writing the anchor and the tip): where the tip says, else
    anywhere on a chain back to the start (readers then skip what follows it)."""
    try:
        size = os.path.getsize(log_path)
    except OSError:
        return False
    if tip.size <= size:
        last = chain._line_before(log_path, tip.size)
        if last is not None and chain.line_hash(last) == tip.hash:
            return True
    return _on_chain(chain._entries(log_path), tip.hash)


def _holds_copy(log_path, tip):
    copy = chain.read_copy(log_path)
    return copy is not None and _on_chain(chain._parse(copy), tip.hash)


def _on_chain(entries, h):
    if not entries or h == chain.GENESIS:
        return False
    return chain.verify(entries, chain.Tip(h, chain.GENESIS, 0)).intact

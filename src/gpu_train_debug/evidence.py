"""What a failure log is made of, read before any keyword decides: the exception chain, the
frames and the library each is in, the rank that failed first, the warnings that came before.

A keyword on the last line is often a consequence: a checkpoint write that failed because the
disk filled, an NCCL error because /dev/shm is 64 MB in a container, a watchdog timeout because
one rank was saving while the others waited. The diagnoser reads this structure first, and every
diagnosis carries the lines that decided it (`intermediates["evidence"]`).

Standard library only; every scan is bounded (str.find from known offsets), so a 10,000-line log
costs about a millisecond here.
"""

import re
from dataclasses import dataclass, field

from gpu_train_debug import logtext

# site-packages/<pkg>/..., dist-packages/<pkg>/..., lib/python3.x/<stdlib module>
_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_][\w.-]*)")
# (r4) and a Windows install's lib folder in lower case (Python37/lib/json, anaconda3/envs/x/lib/runpy.py, with backslashes).
_STDLIB = re.compile(r"[/\\]lib(?:64)?[/\\]python\d[\d.]*[/\\]([A-Za-z_]\w*)|[/\\]Lib[/\\]([A-Za-z_]\w*)(?:\.py\b|[/\\])"
                     r"|[/\\](?:[Pp]ython\d+|(?i:ana|mini)conda\d*|(?i:mini|mamba)forge\d*)(?:[/\\]envs[/\\][^/\\\n]+)?"
                     r"[/\\](?i:lib)[/\\]([A-Za-z_]\w*)(?:\.py\b|[/\\])")


def library(path):
    """The installed package a frame's file belongs to ('torch', 'transformers', 'python' for the
    standard library), or None for the project's own code (what the user can edit)."""
    if not path:
        return None
    if path.startswith("<frozen") or path.startswith("<built-in"):
        return "python"
    if path.startswith("<"):          # <stdin>, <string>, <ipython-input-...>: typed by the user
        return None
    match = _PACKAGE.search(path)
    if match:
        name = match.group(1)
        return name[:-3] if name.endswith(".py") else name.split("-")[0]
    if _STDLIB.search(path):
        return "python"
    return None


@dataclass
class Frame:
    file: str
    line: int
    function: str = None

    @property
    def library(self):
        return library(self.file)

    @property
    def cell(self):
        """A notebook cell (`<ipython-input-3-ab12>`, Jupyter's `Cell In[3]`): code typed where the data
        was loaded and looked at, not a file of the project."""
        return self.file.startswith(("<ipython-input", "<cell In"))


@dataclass
class Link:
    """One exception of a chain, with the frames of its own traceback."""
    type: str
    message: str
    start: int
    frames: list = field(default_factory=list)

    @property
    def name(self):
        return self.type.rsplit(".", 1)[-1]

    def text(self):
        return f"{self.type}: {self.message}".rstrip(": ") if self.message else self.type

    @property
    def raised_in(self):
        """The library of the frame that raised it (None: the project's own code or no frames)."""
        return self.frames[-1].library if self.frames else None

    def user_frame(self):
        """The deepest frame in the project's own code (where the user's call went wrong)."""
        for frame in reversed(self.frames):
            if frame.library is None:
                return frame
        return None


@dataclass
class RootCause:
    """torchrun/elastic's `Root Cause (first observed failure)` block."""
    rank: int = None
    exitcode: int = None
    traceback: str = None
    start: int = 0


@dataclass
class Evidence:
    chain: list                 # the last exception chain, first cause first
    root_cause: RootCause = None
    first_rank: int = None      # the rank whose error line came first (rank-prefixed logs)
    warnings: list = field(default_factory=list)   # (offset, line) before the failure

    @property
    def first(self):
        return self.chain[0] if self.chain else None

    @property
    def last(self):
        return self.chain[-1] if self.chain else None

    def summary(self):
        """What the evidence says, for intermediates (normalised where it helps compare logs)."""
        out = {}
        if self.chain:
            out["exception_chain"] = [normalise(link.text())[:160] for link in self.chain]
            raised_in = self.first.raised_in
            if self.first.frames:
                out["raised_in"] = raised_in or "the project's own code"
        if self.root_cause:
            out["root_cause_rank"] = self.root_cause.rank
            if self.root_cause.exitcode is not None:
                out["root_cause_exitcode"] = self.root_cause.exitcode
        if self.first_rank is not None:
            out["first_failed_rank"] = self.first_rank
        if self.warnings:
            out["warnings_before_failure"] = [normalise(line)[:160] for _, line in self.warnings[-3:]]
        return out


# -- normalising messages -----------------------------------------------------------------

_NORMALISE = (
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:[KMGT]i?B|bytes)\b"), "<size>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]+){2,}[/\\]?"), "<path>"),
    (re.compile(r"\b(cuda|xpu|mps|hip|npu):\d+\b"), r"\1:<n>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b\d+(?:\.\d+)?\b"), "<n>"),
)


def normalise(message):
    """A message with its numbers, sizes, paths, device ids and addresses replaced by placeholders,
    so the same failure reads the same on every machine, rank and run."""
    for regex, placeholder in _NORMALISE:
        message = regex.sub(placeholder, message)
    return message.strip()


# -- reading --------------------------------------------------------------------------------

# Exceptions a launcher raises when its child process failed: the child's own error, printed
# before them, is the cause (accelerate/torchrun/mp.spawn wrap it; the process that failed first).
LAUNCHER_WRAPPERS = ("ChildFailedError", "ProcessExitedException")
_LAUNCHED = re.compile(r"python|accelerate|torchrun|deepspeed|launch", re.I)


# Frames of the launchers' own machinery: a child's failure is never there.
LAUNCHER_FRAME = re.compile(r"torch[/\\]distributed[/\\](?:elastic[/\\]|launcher[/\\]|run\.py)|accelerate[/\\]commands[/\\]"
                            r"|deepspeed[/\\]launcher[/\\]|[/\\]bin[/\\](?:torchrun|accelerate|deepspeed)\b")

# torch.multiprocessing.spawn before 1.8 raised a bare `Exception: process 1 terminated with signal SIGKILL`.
_SPAWN_REPORT = re.compile(r"process \d+ terminated with (?:signal|exit code)")


def is_launcher_report(raised):
    """A launcher's exception that only says its child failed: torchrun's ChildFailedError,
    torch.multiprocessing's report of a process that ended, or a CalledProcessError of a
    Python/accelerate/torchrun/deepspeed command (not of a build tool)."""
    if raised.name in LAUNCHER_WRAPPERS:
        return True
    if raised.name == "Exception" and _SPAWN_REPORT.match(raised.message):
        return True
    return raised.name == "CalledProcessError" and bool(_LAUNCHED.search(raised.message))


def read(text, ranks=None):
    """The evidence of `text`; `ranks` ({line index: rank}, logtext.strip_envelopes) names the rank of
    each line whose `[rankN]:` prefix was stripped."""
    chain = _chain(text)
    start = chain[0].start if chain else len(text)
    first = _first_ranked_error(text, ranks) if ranks else _first_rank(text)
    return Evidence(chain, _root_cause(text), first, _warnings(text, start))


def link_at(text, start):
    """The chain link of the exception printed at `start` (with its frames), or None."""
    for link in _chain(text[:text.find("\n", start) + 1 or len(text)]):
        if link.start == start:
            return link
    return None


def _chain(text):
    found = logtext.exceptions(text)
    if not found:
        return []
    index = len(found) - 1
    while index > 0 and any(marker in text[found[index - 1][1]:found[index][1]] for marker in logtext.CHAINED):
        index -= 1
    links = []
    previous_end = max(0, found[index][1] - 20000) if index == 0 else found[index - 1][1]
    for raised, start in found[index:]:
        frames = [] if _debugger_view(text, start) else [
            Frame(*_frame(m)) for m in logtext.FRAME.finditer(text, previous_end, start)]
        links.append(Link(raised.type, raised.message, start, frames))
        previous_end = start
    return links


def _debugger_view(text, start):
    """True when the exception at `start` is shown by VS Code's exception widget (`Exception has
    occurred: X`) rather than under a traceback header: the widget lists only the user's own frames
    (justMyCode), so the deepest frame it shows is a call site, not where the exception was raised."""
    if logtext.VSCODE not in text:
        return False
    shown = text.rfind(logtext.VSCODE, max(0, start - 20000), start)
    return shown >= 0 and text.rfind(logtext.TRACEBACK, shown, start) < 0


_WRAP_GAP = re.compile(r"[ \t]{3,}")


def _frame(match):
    path, line, function = match.group(1) or match.group(2), int(match.group(3)), match.group(4)
    # A terminal that wrapped a long path pads it with a run of blanks (`site-packages/t      ransformers/`).
    return _WRAP_GAP.sub("", path), line, function


_ROOT = re.compile(
    r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+)(?:.*?exitcode\s*:\s*(-?\d+))?"
    r"(?:.*?traceback\s*:\s*([^\n]*))?", re.S)


def _root_cause(text):
    at = text.rfind("Root Cause (first observed failure)")
    if at < 0:
        return None
    match = _ROOT.match(text, at, min(len(text), at + 2000))
    if not match:
        return RootCause(start=at)
    exitcode = int(match.group(2)) if match.group(2) else None
    return RootCause(int(match.group(1)), exitcode, (match.group(3) or "").strip() or None, at)


_RANK_ERROR = re.compile(r"^[^\S\n]*\[(?:rank|default)(\d+)\]:[^\S\n]*(?:[\w.]+(?:Error|Exception)\b|Traceback)", re.M)


RANK_WINDOW = 64 * 1024


def _first_rank(text):
    """The rank whose exception line or traceback came first, in `[rankN]:`-prefixed logs (looked
    for in the last 64 KiB, where the failure is: str.find over a whole long log costs ms)."""
    begin = max(0, len(text) - RANK_WINDOW)
    pos = text.find("[rank", begin)
    if pos < 0:
        pos = text.find("[default", begin)
    if pos < 0:
        return None
    match = _RANK_ERROR.search(text, text.rfind("\n", 0, pos) + 1)
    return int(match.group(1)) if match else None


_ERROR_START = re.compile(r"[^\S\n]*(?:[\w.]+(?:Error|Exception)\b|Traceback)")


def _first_ranked_error(text, ranks):
    """The rank of the first exception line or traceback among the rank-prefixed lines of the last
    64 KiB (the same window as _first_rank; the prefixes were stripped, their ranks kept by line)."""
    first = text.count("\n", 0, max(0, len(text) - RANK_WINDOW))
    lines = None
    for index in sorted(i for i in ranks if i >= first):
        if lines is None:
            lines = text.split("\n")
        if index < len(lines) and _ERROR_START.match(lines[index]):
            return ranks[index]
    return None


_WARNING = re.compile(r"\b\w*Warning\b|\bWARN(?:ING)?\b")
WARNING_WINDOW = 32 * 1024


def _warnings(text, before):
    """Warning lines in the 32 KiB before the failure (the ones that can explain it), found with
    str.find on the words and the regex run only on those lines."""
    begin = max(0, before - WARNING_WINDOW)
    starts = set()
    for word in ("Warning", "WARN"):
        pos = text.find(word, begin, before)
        while pos >= 0:
            starts.add(text.rfind("\n", 0, pos) + 1)
            pos = text.find(word, pos + len(word), before)
    found = []
    for start in sorted(starts):
        stop = text.find("\n", start, before)
        line = text[start:before if stop < 0 else stop]
        if _WARNING.search(line):
            found.append((start, line.strip()))
    return found[-20:]

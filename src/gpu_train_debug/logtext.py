"""Make a raw log readable by line rules, and pull out what the run itself said.

Logs come from terminals, CI pages and issue threads: ANSI colour codes, tqdm's carriage
returns, markdown quote markers (`> `) and bold (`**Killed**`), rich-style tracebacks drawn
in box characters, `[rank3]:` prefixes, and an exception type printed on one line with its
message wrapped onto the next. `normalise` undoes those so that one failure is one line.

`last_exception` finds the exception that ended the run: the last chain of tracebacks, and
in it the first exception (the cause; "During handling of the above exception" and "The
above exception was the direct cause" introduce its consequences), with the deepest frame
of the traceback above it (file, line, function) when one was printed.
"""

import bisect
import collections
import functools
import re
from dataclasses import dataclass

_M = re.MULTILINE
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]")
# `> `, `>> `, `│ ` (rich boxes) and surrounding blanks at a line start; `**` bold markers.
QUOTE = re.compile(r"^[ \t]*(?:(?:>|│|┃|\|)[ \t]?)+", _M)
BOLD = re.compile(r"\*\*(?=\S)|(?<=\S)\*\*")
# Markdown emphasis or code marks opening a line: `_**RuntimeError: ...**_`, `` `ValueError: ...` ``.
LEADING_MARKS = re.compile(r"^([ \t]*)[_*`]+(?=[A-Za-z\[\d])", _M)
# Markdown's triple-backtick marks used inline, around words of a sentence: "the loss starts returning
# ```NaN values```" (a fence alone on its line, with no word against it, stays).
INLINE_FENCE = re.compile(r"(?<=[^\s`])```|```(?=[^\s`])")
# An inline-code mark that closes a line, its opening one on an earlier line: `` ...Killed sh start.sh` ``.
TRAILING_MARK = re.compile(r"^([^`\n]*\S)`+[ \t]*$", _M)
BOX_END = re.compile(r"[ \t]*[│┃][ \t]*$", _M)
# `RuntimeError:` alone on a line, its message on the next: join them.
WRAPPED = re.compile(r"^([ \t]*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)):[ \t]*\n[ \t]*(?=\S)", _M)


def normalise(text):
    """The log with every progress redraw on its own line and presentation marks removed."""
    return normalise_lines(text)[0]


def normalise_lines(text):
    """normalise(text), and {line index: rank} for its lines that torchrun's `[rankN]:` (or
    nanotron's `[defaultN]:`) prefix named: the prefixes go with the other per-line envelopes
    (timestamps, logger headers), so line rules read the program's words, and the ranks stay known."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unwrap_terminal_width(text)
    if "│" in text or "┃" in text:
        text = rich_frames(text)
    if ">" in text or "│" in text or "┃" in text or "|" in text:
        text = QUOTE.sub("", text)
        if "│" in text or "┃" in text:
            text = BOX_END.sub("", text)
    text, ranks = strip_envelopes(text)
    text = paste_forms(text)
    if "**" in text:
        text = BOLD.sub("", text)
    if "```" in text:
        text = INLINE_FENCE.sub("", text)
    if "`" in text or "_" in text or "*" in text:
        text = LEADING_MARKS.sub(r"\1", text)
        if "`" in text:
            text = TRAILING_MARK.sub(r"\1", text)
    if "Error:\n" in text or "Exception:\n" in text or "Error: \n" in text:
        text, ranks = _join_wrapped(text, ranks)
    return text, ranks


# A terminal copy that hard-wrapped every long line at the window's width (the rest of a message goes on
# the next line at column 0, mid-word: `... ProcessGroupNCCL'` / `s watchdog got stuck for 480 seconds`).
# The width is a line length that at least three lines whose text runs up to that edge share, two of them
# cut inside a word (a letter, digit or apostrophe at the edge, a lower-case letter at the next line's start),
# so tqdm bars and tables padded to one width do not count. Each line reaching that edge is joined with the
# next unless that one starts a new record: `[`, a traceback, an empty line, `usage: `/`error: `, an exception
# name, or the edge line's own first eight characters, digits aside (the next record of a fixed format, `host:pid:tid [2]
# NCCL INFO ...`). Lines of box drawings or of one repeated mark (rules, bars) are never joined.
_WRAP_MIN_WIDTH = 60
_WRAP_SAMPLE_LINES = 2000
_NEW_RECORD = re.compile(r"\[|Traceback |[ \t]+File \"|\s*$|[a-z_]+: |[\w.]*(?:Error|Exception|Warning)\b")
_NOT_PROSE = re.compile(r"[│┃╭╮╰╯]|[─━=#*_~-]{8}")
_QUOTE_MARK = re.compile(r"^(?:> ?)+")   # a quote-reply's marker before every line, wrapped ones too


def unwrap_terminal_width(text, min_width=_WRAP_MIN_WIDTH):
    """`text` with the lines a terminal hard-wrapped at its width joined again."""
    if len(text) < 3 * min_width or text.count("\n") < 3:
        return text
    lines = text.split("\n")
    lengths = [len(line) for line in lines]
    # The width is read from the last lines (a terminal wraps every line alike; a long log is mostly steps).
    tail = max(0, len(lines) - _WRAP_SAMPLE_LINES)
    cuts = collections.Counter(lengths[i] for i in range(tail, len(lines) - 1)
                               if lengths[i] >= min_width and _cut_in_word(lines[i], lines[i + 1]))
    for width, cut in cuts.most_common():
        if cut < 2:
            return text
        edge = [i for i, n in enumerate(lengths[:-1]) if n == width and lines[i][-2:].strip()
                and not _NOT_PROSE.search(lines[i])]
        if len(edge) >= 3 and sum(map(_cut_in_word, (lines[i] for i in edge), (lines[i + 1] for i in edge))) >= 2:
            break
    else:
        return text
    edge, joined = set(edge), []
    for index, line in enumerate(lines):
        rest = _unquoted(line) if index - 1 in edge else None
        if rest is not None and not _NEW_RECORD.match(rest) and not _same_start(rest, _unquoted(lines[index - 1])):
            joined[-1] += rest
        else:
            joined.append(line)
    return "\n".join(joined)


def _cut_in_word(line, after):
    """True when `line` ends inside a word that `after` (past a quote marker) goes on with."""
    if not line or not (line[-1].isalnum() or line[-1] == "'"):
        return False
    after = _unquoted(after)
    # A line that starts as this one did is the next record of the same format (`host:pid:tid [2] NCCL INFO`,
    # `step 01000 | loss ...` after `step 00999 | loss ...`: digits aside), both read past a quote marker.
    return (bool(after) and after[0].islower() and not _same_start(after, _unquoted(line))
            and not _NEW_RECORD.match(after))


_DIGITS = str.maketrans("123456789", "000000000")


def _same_start(line, other):
    return line[:8].translate(_DIGITS) == other[:8].translate(_DIGITS)


def _unquoted(line):
    return _QUOTE_MARK.sub("", line) if line[:1] == ">" else line


def _join_wrapped(text, ranks):
    """WRAPPED joins an exception line with its message line; the ranks of later lines move up one
    line for each join before them."""
    joined = [text.count("\n", 0, m.start()) for m in WRAPPED.finditer(text)]
    if not joined:
        return text, ranks
    text = WRAPPED.sub(r"\1: ", text)
    if ranks:
        moved = {}
        for index, rank in ranks.items():
            before = bisect.bisect_left(joined, index)   # joins of lines above this one
            if before and joined[before - 1] == index - 1:
                continue                                  # the message line, now part of the line above
            moved[index - before] = rank
        ranks = moved
    return text, ranks


# Per-line envelopes that launchers, loggers and log viewers put before what the program printed:
# torchrun's `[rank3]:` / nanotron's `[default3]:`, timestamps (`2024-11-20 14:37:16 `,
# `[2024-04-20 18:56:38,931] `, TensorFlow's `2020-09-24 18:27:41.164048: `, CI's ISO `...Z `), glog
# headers (`E0328 18:18:48.413000 140217767576768 api.py:826] `), line numbers of a web UI's log view
# (`[1743] `), `stderr: `, mpirun's `[1,0]<stdout>:`, Ray's and vLLM's process tags
# (`(RayWorkerWrapper pid=123) `, `(Worker_TP0 pid=160) ERROR 05-20 20:54:32 [file.py:962] `).
# They carry no cause, and a rule that reads a line from its start must see the program's words.
_ENVELOPE = re.compile(
    r"^(?:[ \t]*(?:\[(?:rank|default)\d+\]: ?"
    r"|\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?:? "
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\s\]]+:\d+\] "
    r"|\[\d{1,7}\] "
    r"|(?:stderr|stdout): |\[\d+,\d+\]<(?:stdout|stderr)>: ?"
    r"|\((?:[\w.-]+ )?pid=\d+(?:, ip=[\d.]+)?\) "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[[\w./-]+:\d+\] "
    r"))+")
_RANK_TAG = re.compile(r"\[(?:rank|default)(\d+)\]:")
# Cheap test before the per-line pass: a log without any envelope costs one regex search.
_ENVELOPE_ANY = re.compile(_ENVELOPE.pattern, re.M)


def strip_envelopes(text):
    """`text` without per-line envelopes, and {line index: rank} for the lines a `[rankN]:` or
    `[defaultN]:` prefix named (line indexes stay the same: no line is joined or split)."""
    if not _ENVELOPE_ANY.search(text):
        return text, {}
    lines = text.split("\n")
    ranks = {}
    for index, line in enumerate(lines):
        match = _ENVELOPE.match(line)
        if not match or not match.end():
            continue
        tag = None
        for tag in _RANK_TAG.finditer(match.group(0)):
            pass
        if tag:
            ranks[index] = int(tag.group(1))
        lines[index] = line[match.end():]
    return "\n".join(lines), ranks


# -- the forms a traceback is pasted in ------------------------------------------------------
# Each rewrite below keeps the number of lines (the rank map is keyed by line index): a form's frame
# becomes CPython's `File "path", line N, in func` on the line that named the frame, and what the rewrite
# takes away is left as an empty line.

# rich's boxed traceback (accelerate, typer, kohya's scripts): `│ /path/x.py:12 in func │`; a path too long
# for the box is wrapped onto the next box line (`│ .../launch.p │` then `│ y:567 in simple_launcher │`).
_RICH_FRAME = re.compile(r"^([ \t]*[│┃][ \t]*)([^\s│┃]*[/\\][^│┃\n]*?|[^\s│┃]+\.py):(\d+) in (\S+)[ \t]*(?:[│┃][ \t]*)?$")
_RICH_WRAPPED = re.compile(r"^[ \t]*[│┃][ \t]*([^\s│┃]*[/\\][^\s│┃]*)[ \t]*[│┃][ \t]*$")
# The box's top names it a traceback; its bottom edge would stand where CPython prints the failing line.
_RICH_TOP = re.compile(r"^[ \t]*[╭┏]─+ Traceback \(most recent call last\) ─+[╮┓][ \t]*$")
_RICH_BOTTOM = re.compile(r"^[ \t]*[╰┗]─+[╯┛][ \t]*$")
_RICH_TAIL = re.compile(r"^([ \t]*[│┃][ \t]*)([^\s│┃]*):(\d+) in (\S+)[ \t]*(?:[│┃][ \t]*)?$")


def rich_frames(text):
    """rich's frame headers as CPython frame lines (the box's source lines and arrows stay)."""
    if " in " not in text or "Traceback" not in text:
        return text
    lines = text.split("\n")
    changed = False
    for index, line in enumerate(lines):
        if "│" not in line and "┃" not in line:
            if "Traceback" in line and _RICH_TOP.match(line):
                lines[index] = TRACEBACK + ":"
            elif line.lstrip().startswith("╰") and _RICH_BOTTOM.match(line):
                lines[index] = ""
            continue
        match = _RICH_FRAME.match(line)
        if match:
            lines[index] = f'{match.group(1)}File "{match.group(2)}", line {match.group(3)}, in {match.group(4)}'
            _source_below(lines, index, _RICH_ARROW, _RICH_CONTEXT)
            changed = True
            continue
        wrapped = _RICH_WRAPPED.match(line)
        tail = _RICH_TAIL.match(lines[index + 1]) if wrapped and index + 1 < len(lines) else None
        if tail:
            lines[index] = ""
            lines[index + 1] = f'{tail.group(1)}File "{wrapped.group(1)}{tail.group(2)}", line {tail.group(3)}, in {tail.group(4)}'
            _source_below(lines, index + 1, _RICH_ARROW, _RICH_CONTEXT)
            changed = True
    return "\n".join(lines) if changed else text


# The source a notebook or rich shows under a frame: numbered context lines and the one it ran on an arrow
# (`---> 12 x = f()`, `❱ 12 │ x = f()`). As in CPython, the line it ran goes right under the frame; the
# context lines (code around it that did not run) are emptied.
_RICH_ARROW = re.compile(r"^[ \t]*[│┃][ \t]*❱[ \t]*\d+[ \t]*[│┃][ \t]?(.*?)[ \t]*(?:[│┃][ \t]*)?$")
_RICH_CONTEXT = re.compile(r"^[ \t]*[│┃][ \t]*(?:\d+[ \t]*[│┃].*|[ \t]*(?:[│┃][ \t]*)?)$")
_NOTEBOOK_ARROW = re.compile(r"^[ \t]*-{1,4}>[ \t]*\d+ ?(.*?)[ \t]*$")
_NOTEBOOK_CONTEXT = re.compile(r"^[ \t]*(?:\d+(?: .*)?|\(\.\.\.\)|\[\.\.\. skipping hidden \d+ frame\])[ \t]*$")


def _source_below(lines, index, arrow, context):
    """Move the arrowed source line of the frame at `index` right under it; empty its context lines."""
    ran = None
    end = index + 1
    while end < len(lines) and end < index + 60:
        hit = arrow.match(lines[end])
        if hit:
            ran = hit.group(1).strip() if ran is None else ran
        elif not context.match(lines[end]):
            break
        end += 1
    if ran is None:
        return
    for cursor in range(index + 1, end):
        lines[cursor] = ""
    lines[index + 1] = "    " + ran


# IPython 7 and Colab name a frame `/path/x.py in func(args)` (Colab: `[/path/x.py](https://localhost:8080/#)
# in func()`, the cell `<ipython-input-3-ab12> in <module>`) and give its line on an arrow below: `--> 429 ...`.
_OLD_IPYTHON = re.compile(r"^[ \t]*(?:\[([^\]\n]+)\]\([^)\n]*\)|(<ipython-input-[\w-]+>|[^\s\[]*[/\\][^\n]*?\.py|\S+\.py)) in ([\w<>.]+)(?:\(.*)?$")
_ARROW = re.compile(r"^[ \t]*-{1,4}> ?[ \t]*(\d+)\b")
# IPython 8 / Jupyter names the cell `Cell In[3], line 5`, `Cell In [3], line 5` or `Input In [3], in <cell line: 5>()`.
_IPYTHON8_FRAME = re.compile(r"^File (?!\")[^\n\"]+?:\d+, in ")   # a path may hold spaces (`My Drive`)
_CELL = re.compile(r"^[ \t]*(?:Cell|Input) In ?\[(\d*)\], (?:line (\d+)|in <cell line: (\d+)>\(\))(?:, in (\S+))?")


# Lines that can name a notebook frame, found in the whole text at once (a long log has few).
_NOTEBOOK_HEAD = re.compile(r"^[ \t]*(?:Cell In|Input In|File (?!\")[^\n\"]+?:\d+, in |\[[^\]\n]+\]\(|<ipython-input|[^\n]*\.py in )", _M)
_ARROW_ANY = re.compile(r"^[ \t]*-{1,4}> ?[ \t]*\d", _M)


def _line_indexes(text, regex):
    """The indexes of the lines on which `regex` matches (its matches start lines)."""
    indexes, counted, offset = [], 0, 0
    for match in regex.finditer(text):
        counted += text.count("\n", offset, match.start())
        offset = match.start()
        if not indexes or indexes[-1] != counted:
            indexes.append(counted)
    return indexes


def _ipython_frames(lines, indexes):
    changed = False
    for index in indexes:
        line = lines[index]
        cell = _CELL.match(line)
        if cell:
            number = cell.group(2) or cell.group(3)
            lines[index] = f'File "<cell In[{cell.group(1)}]>", line {number}, in {cell.group(4) or "<module>"}'
            _source_below(lines, index, _NOTEBOOK_ARROW, _NOTEBOOK_CONTEXT)
            changed = True
            continue
        if line.startswith("File ") and _IPYTHON8_FRAME.match(line):
            _source_below(lines, index, _NOTEBOOK_ARROW, _NOTEBOOK_CONTEXT)
            changed = True
            continue
        if " in " not in line or not (".py" in line or "<ipython-input" in line):
            continue
        frame = _OLD_IPYTHON.match(line)
        if not frame:
            continue
        for below in lines[index + 1:index + 40]:
            arrow = _ARROW.match(below)
            if arrow:
                path = frame.group(1) or frame.group(2)
                lines[index] = f'File "{path}", line {arrow.group(1)}, in {frame.group(3)}'
                _source_below(lines, index, _NOTEBOOK_ARROW, _NOTEBOOK_CONTEXT)
                changed = True
                break
            if _OLD_IPYTHON.match(below) or below.startswith("File "):
                break
    return changed


# VS Code's exception widget: `Exception has occurred: ValueError`, the message on the next line (the
# frames it lists are the user's own code only). The message line becomes the exception line; the
# widget's header stays, and tells evidence.py that the frames below it are not the whole traceback.
VSCODE = "Exception has occurred: "
_VSCODE_HEAD = re.compile(r"^[ \t]*Exception has occurred: ((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)[ \t]*$")

# Python's report of an exception it ignored (in a destructor, at interpreter shutdown): it did not end the
# run, and the traceback that follows it is taken out of what the rules read.
_IGNORED = re.compile(r"^[ \t]*Exception ignored in\b")
_EXCEPTION_LINE = re.compile(r"^[ \t]*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::|[ \t]*$)")

# Hints that list what might have happened, not what did: Ray's worker-death message ends with its
# `potential root causes. (1) The process is killed by SIGKILL by OOM killer ... (2) ray stop --force ...`.
_PASTE_MARKS = re.compile(r"^[ \t]*(?:Exception has occurred: |Exception ignored in\b)", _M)
_HINTS = re.compile(r"(?<=There are some potential root causes\.)[^\n]*")


def paste_forms(text):
    """The traceback forms of notebooks, debuggers and rich read as CPython's; ignored exceptions and
    listed possibilities taken out (the line count stays)."""
    notebook = "Cell In" in text or "Input In" in text or ("> " in text and _ARROW_ANY.search(text))
    vscode = VSCODE in text
    ignored = "Exception ignored in" in text
    if "potential root causes" in text:
        text = _HINTS.sub("", text)
    if not (notebook or vscode or ignored):
        return text
    lines = text.split("\n")
    changed = _ipython_frames(lines, _line_indexes(text, _NOTEBOOK_HEAD)) if notebook else False
    for index in _line_indexes(text, _PASTE_MARKS):
        line = lines[index]
        if vscode and line.lstrip().startswith(VSCODE):
            head = _VSCODE_HEAD.match(line)
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            if head and following and not following.startswith("File ") and not _EXCEPTION_LINE.match(following):
                lines[index + 1] = f"{head.group(1)}: {following}"
                changed = True
        elif ignored and _IGNORED.match(line):
            changed |= _blank_ignored(lines, index)
    return "\n".join(lines) if changed else text


def _blank_ignored(lines, index):
    """Blank `Exception ignored in: ...` and the traceback under it, through its exception line."""
    end = None
    for cursor in range(index + 1, min(len(lines), index + 200)):
        stripped = lines[cursor].strip()
        if cursor == index + 1 and not stripped.startswith(TRACEBACK) and _EXCEPTION_LINE.match(lines[cursor]):
            end = cursor
            break
        if cursor == index + 1 and not stripped.startswith(TRACEBACK):
            break
        if cursor > index + 1 and _EXCEPTION_LINE.match(lines[cursor]) and not lines[cursor].startswith(" "):
            end = cursor
            break
    for cursor in range(index, (end if end is not None else index) + 1):
        lines[cursor] = ""
    return True


def line_index(text, offset):
    """The index of the line that holds `offset` (what strip_envelopes' rank map is keyed by)."""
    return text.count("\n", 0, offset)


# An exception line: `ValueError: ...`, `torch.cuda.OutOfMemoryError: ...`, `[rank0]: KeyError: 'x'`.
EXCEPTION = re.compile(
    r"^[^\S\n]*(?:\[[^\]\n]{1,40}\]:?[^\S\n]*)*((?:[A-Za-z_][\w]*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)"
    # a bare `Exception: message` (raise Exception(...)) needs its colon: "Exception" alone is a word
    r"|Exception(?=:)))"
    r"(?::[^\S\n]*(.*)|[^\S\n]{2,}(Traceback \(most recent call last\)))?$", _M)
# `File "x.py", line 3, in f` (CPython) and `File ~/x.py:3, in f(...)` (IPython/Jupyter).
# A `[rank0]:` / `[default3]:` prefix (torchrun's per-rank output) does not hide a frame.
# IPython 8 writes `File /content/My Drive/x.py:17, in f(...)`: an unquoted path may hold spaces there.
FRAME = re.compile(r'^[^\S\n]*(?:\[(?:rank|default)\d+\]:[^\S\n]*)?File (?:"([^"\n]+)", line '
                   r'|(\S+?|[^"\n]+?(?=:\d+, in )):)(\d+)(?:, in ([^\s(]+))?', _M)
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Raised:
    type: str           # e.g. "NameError", "torch.cuda.OutOfMemoryError"
    message: str
    file: str = None     # the deepest frame of its traceback, when printed
    line: int = None
    function: str = None
    start: int = 0        # offset of the exception line in the text

    @property
    def name(self):
        return self.type.rsplit(".", 1)[-1]

    def where(self):
        if not self.file:
            return ""
        place = f"{self.file} line {self.line}"
        return place + (f", in {self.function}" if self.function and self.function != "<module>" else "")

    def text(self):
        return f"{self.type}: {self.message}".rstrip(": ") if self.message else self.type


_KINDS = ("Error", "Exception", "Exit", "Interrupt")


def _candidate_lines(text):
    """Starts of the lines that name an exception kind (str.find runs at C speed)."""
    starts = set()
    for word in _KINDS:
        pos = text.find(word)
        while pos >= 0:
            starts.add(text.rfind("\n", 0, pos) + 1)
            newline = text.find("\n", pos)
            if newline < 0:
                break
            pos = text.find(word, newline + 1)
    return sorted(starts)


def exceptions(text):
    """Every exception line in order, as (Raised, start offset); warnings left out."""
    return [(Raised(r.type, r.message), start) for r, start in _exceptions(text)]


@functools.lru_cache(maxsize=8)
def _exceptions(text):
    found = []
    for line_start in _candidate_lines(text):
        match = EXCEPTION.match(text, line_start)
        if not match:
            continue
        kind = match.group(1)
        if kind.endswith("Warning"):
            continue
        message = (match.group(2) or "").strip()
        found.append((Raised(kind, message[:400]), match.start(), bool(match.group(3))))
    return tuple((raised, start) for index, (raised, start, header) in enumerate(found)
                 if not header or not _closed(text, start, found[index + 1:]))


def _closed(text, start, later):
    """Jupyter's `KeyError      Traceback (most recent call last)` header opens a traceback whose own
    exception line follows its frames: the header counts as an exception only when that line was not
    printed (a paste cut before it, or the next traceback of a chain begins first)."""
    if not later:
        return False
    body = text[text.find("\n", start) + 1:later[0][1]]
    return not later[0][2] and TRACEBACK not in body and not any(marker in body for marker in CHAINED)


def last_exception(text):
    """The cause of the last traceback chain in `text`, or None when no exception was printed."""
    found = exceptions(text)
    if not found:
        return None
    # Walk back over chained exceptions to the first of the last chain.
    index = len(found) - 1
    while index > 0:
        between = text[found[index - 1][1]:found[index][1]]
        if any(marker in between for marker in CHAINED):
            index -= 1
        else:
            break
    raised, start = found[index]
    raised.start = start
    frames = list(FRAME.finditer(text, max(0, start - 20000), start))
    # `<string>` (eval) and `<frozen importlib...>` frames name no file the user can open.
    real = [f for f in frames if not _frame(f)[0].startswith("<")] or frames
    if real:
        raised.file, raised.line, raised.function = _frame(real[-1])
    return raised


def _frame(match):
    return match.group(1) or match.group(2), int(match.group(3)), match.group(4)


def traceback_start(text, start):
    """Where the traceback of the exception line at `start` begins: its `Traceback (most recent call
    last)` line (Jupyter's `Type   Traceback ...` header included), when one follows the exception line
    before it; else `start`. What comes before is what the run printed before this exception."""
    header = text.rfind(TRACEBACK, 0, start)
    if header < 0:
        return start
    line = text.rfind("\n", 0, header) + 1
    between = [found for _, found in _exceptions(text[:start]) if line < found]
    return line if not between else start


def deepest_frame(text, skip=None):
    """(file, line, function) of the last traceback frame printed (whose file `skip` does not
    match, e.g. a launcher's own frames), or None."""
    last = None
    for match in FRAME.finditer(text):
        if skip is None or not skip.search(_frame(match)[0]):
            last = match
    return _frame(last) if last else None


# Frames in installed code (torch, the standard library) are not where an edit broke something.
# (r4) Windows keeps the standard library in <install>/Lib (Python310/lib/json, anaconda3/lib/runpy.py, typed with backslashes).
# A notebook cell (`<cell In[3]>`, `<ipython-input-3-..>`) is the user's own code; `<string>`, `<frozen ..>` are not.
_LIBRARY = re.compile(r"[/\\](?:site-packages|dist-packages|lib[/\\]python[\d.]*)[/\\]|^<(?!cell In\[|ipython-input-)"
                      r"|[/\\](?:[Pp]ython\d+|(?i:ana|mini)conda\d*|(?i:mini|mamba)forge\d*)"
                      r"(?:[/\\]envs[/\\][^/\\\n]+)?[/\\](?i:lib)[/\\]")


def own_frame(text, end=None):
    """(file name, line, function, source line) of the deepest traceback frame before `end` that
    is in the run's own code (train.py, not torch or the standard library), or None."""
    end = len(text) if end is None else end
    last = None
    for match in FRAME.finditer(text, max(0, end - 20000), end):
        if not _LIBRARY.search(_frame(match)[0]):
            last = match
    if last is None:
        return None
    path, line, function = _frame(last)
    rest = text[last.end():last.end() + 400].split("\n")
    source = rest[1].strip() if len(rest) > 1 and not rest[1].lstrip().startswith("File ") else ""
    return re.split(r"[/\\]", path)[-1], line, function, source


_NOISE = re.compile(r"^\s*(?:\^+|~+|-+|=+|`+|\.\.\.|\(\.\.\.\))?\s*$")


def last_printed(text, limit=200):
    """The last line that says something (not a blank, a caret marker or a rule)."""
    end = len(text)
    for _ in range(200):
        start = text.rfind("\n", 0, end - 1) + 1 if end > 0 else 0
        line = text[start:end].strip()
        if line and not _NOISE.match(line):
            return line[:limit]
        if start == 0:
            return None
        end = start - 1
    return None


EXIT_STATUS = re.compile(
    r"(?i:exit(?:ed)?(?: with)?(?: code| status)?[ :=]+)(-?\d+)|(?i:exitcode\s*:\s*)(-?\d+)|(?i:failed with code )(-?\d+)"
    # A launcher's words for its child's signal: `killed by SIGKILL`, torch.multiprocessing's `process 0
    # terminated with signal SIGKILL`, subprocess's `died with <Signals.SIGKILL: 9>`.
    r"|(?i:killed by |terminated with signal |died with <Signals\.)(SIG[A-Z]+)|(?i:signal )\d+ \((SIG[A-Z]+)\)"
    r"|(?i:killed by signal:? )(\d+)")
_SIGNALS = {9: "SIGKILL", 11: "SIGSEGV", 6: "SIGABRT", 15: "SIGTERM", 2: "SIGINT", 7: "SIGBUS"}


def exit_status(text, reason=""):
    """What ended the process, from the engine's reason or the log: 'exit 137', 'SIGKILL', ..."""
    for source in (reason or "", text[-8192:]):
        match = None
        for match in EXIT_STATUS.finditer(source):
            pass
        if not match:
            continue
        code, exitcode, failed, killed, named, signum = match.groups()
        if killed or named:
            return killed or named
        if signum:
            return _SIGNALS.get(int(signum), f"signal {signum}")
        number = int(code or exitcode or failed)
        if number < 0:
            return _SIGNALS.get(-number, f"signal {-number}")
        return f"exit {number}"
    return None


SUGGESTION = re.compile(
    r"\b(?:[Rr]e-?run|[Pp]lease run|[Rr]un|[Tt]ry running)\s+`?((?:python3?|uv run|bash|sh|make|pip install|\./)"
    r"[^`\n!;]*?)`?(?=\s+(?:to|first|before|again)\b|[`!;]|\.(?:\s|$)|$)", _M)


def suggested_command(text):
    """A command the log itself tells the user to run (`Run python tokenizer.py to ...`)."""
    match = None
    for match in SUGGESTION.finditer(text[-65536:]):
        pass
    return match.group(1).strip() if match else None

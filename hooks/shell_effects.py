"""What a Bash command would write and read, worked out from its words without running it.

The PreToolUse hook asks this before Claude Code runs a Bash command. The words come from the
standard library's `shlex` (quotes, escapes, operators); on top of it we follow what bash
would do with them: redirections, `cd` and subshells, variables set earlier in the command
and `for` loops, `$(...)` and backticks, heredocs, `bash -c`/`eval`/scripts run with `bash`
or `source`, `xargs` and `find -exec`, `make` recipes, and the commands that write files:
rm/mv/cp -t/install/ln/tee/dd/truncate, in-place editors (sed -i, perl -i, awk -i inplace, ed,
vim), formatters, git (checkout/restore/switch/reset/stash/apply/clean), patch, tar/unzip,
curl/wget. Inline programs (`python3 -c`, `perl -e`, `node -e`, a heredoc to python) are
returned as code for the caller to scan.

What cannot be named is returned as `Somewhere` (any file under a folder, maybe of a name
pattern): `ls | xargs rm`, `find . -delete`, an unknown variable, a patch from a pipe. The
caller decides whether a protected file could be in it. What a program does inside a script
file is not visible here at all; references/hooks.md says what the engine does about that.

Standard library only; nothing here runs the command. Only git is asked (read-only) where
the files a git command would touch depend on the repository.
"""

import fnmatch
import io
import os
import re
import shlex
from dataclasses import dataclass, field

MAX_DEPTH = 4            # bash -c "bash -c ..." and scripts calling scripts
MAX_SCRIPT_BYTES = 256 * 1024
NEWLINE = "\x00"         # stands for a newline while shlex reads (it treats \n as a space)

OPERATORS = ("&>>", "<<<", "<<-", ";;", "&&", "||", "|&", ">>", "&>", ">&", "<&", ">|", "<>", "<<", "<(", ">(",
             ";", "&", "|", "(", ")", "<", ">", "{", "}")
SEPARATORS = {";", "&", "&&", "||", "|", "|&", ";;", "{", "}", NEWLINE}
OUTPUT_REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>"}
KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "esac", "function"}
PREFIXES = {"sudo", "doas", "command", "builtin", "exec", "nohup", "time", "nice", "ionice", "stdbuf",
            "chronic", "unbuffer", "setsid", "flock", "timeout", "env", "caffeinate", "catchsegv"}
PREFIX_OPTIONS_WITH_VALUE = {
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U"}, "nice": {"-n"}, "ionice": {"-c", "-n", "-p"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"}, "env": {"-u", "-C", "-S", "--unset", "--chdir"},
    "stdbuf": {"-i", "-o", "-e"}, "flock": {"-w", "-E", "--timeout", "--conflict-exit-code"},
}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "busybox"}
INTERPRETERS = {"python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "node", "nodejs", "deno", "bun",
                "php", "Rscript", "julia", "lua", "tclsh", "osascript"}
CODE_FLAGS = {"-c", "-e", "-E", "-r", "--eval", "-p", "--print", "-x"}
REMOVERS = {"rm", "unlink", "shred", "truncate", "rmdir", "tee", "sponge", "chmod", "chown", "chgrp", "chattr",
            "setfacl", "dos2unix", "unix2dos", "black", "isort", "autopep8", "yapf", "autoflake", "ed", "ex",
            "vi", "vim", "nvim", "nano", "emacs", "pico", "joe", "mcedit", "gzip", "bzip2", "xz", "zstd",
            "gunzip", "bunzip2", "unxz", "lzma", "srm", "wipe"}
OPTIONS_WITH_VALUE = {
    "truncate": {"-s", "--size", "-r", "--reference"}, "chmod": {"--reference"}, "chown": {"--reference"},
    "shred": {"-n", "-s", "--iterations", "--size"}, "cp": {"-S", "--suffix"}, "mv": {"-S", "--suffix"},
    "ln": {"-S", "--suffix"}, "install": {"-m", "-o", "-g", "-S", "--mode", "--owner", "--group", "--suffix"},
    "sed": {"-e", "-f", "--expression", "--file", "-l", "--line-length"},
    "perl": {"-e", "-E", "-M", "-m", "-I"}, "awk": {"-f", "-v", "-F", "-e"}, "gawk": {"-f", "-v", "-F", "-e"},
    "xargs": {"-I", "-n", "-L", "-P", "-d", "-a", "-E", "-s", "--max-args", "--max-procs", "--delimiter",
              "--arg-file", "--replace"},
    "tar": {"-f", "-C", "-T", "-X", "-b", "-H", "--file", "--directory", "--files-from", "--exclude-from"},
    "curl": {"-d", "-H", "-u", "-X", "-A", "-e", "-b", "-c", "-F", "-m", "-x", "-w", "--data", "--header",
             "--user", "--request", "--user-agent", "--max-time", "--proxy", "--write-out", "--cookie",
             "--cookie-jar", "--retry", "--connect-timeout"},
    "wget": {"-e", "-t", "-T", "-U", "--tries", "--timeout", "--user-agent", "--header"},
    "patch": {"-p", "-d", "-D", "-F", "-V", "-z", "-B", "-Y", "-r", "--directory", "--strip", "--suffix"},
    "git": {"-C", "-c", "--git-dir", "--work-tree", "--namespace"},
    "make": {"-C", "-f", "-I", "-j", "-l", "-o", "-W", "--directory", "--file", "--makefile", "--jobs"},
    "find": set(), "rsync": {"-e", "--rsh", "--exclude", "--include", "--filter", "-f"},
    "unzip": {"-d", "-x", "-P"}, "sort": {"-k", "-t", "-S", "-T", "--key", "--field-separator"},
    "uv": {"--python", "-p", "--with", "--directory", "--project", "--extra", "--group", "--index"},
}


@dataclass(frozen=True)
class Somewhere:
    """Files the command writes but that cannot be named: any file under `base` (recursively)
    whose name matches `pattern` (None: any name). `why` says what made them unknown."""
    base: str
    pattern: object
    why: str


@dataclass(frozen=True)
class Code:
    """An inline program (python3 -c, perl -e, a heredoc fed to node...) run in `cwd`."""
    cwd: str
    text: str
    language: str


@dataclass(frozen=True)
class GitTree:
    """A git command that makes the work tree in `cwd` look like `rev` for the files that differ."""
    cwd: str
    rev: str
    base: object = None     # compare `base`..`rev` (cherry-pick, revert); None: the work tree


@dataclass
class Effects:
    writes: list = field(default_factory=list)    # absolute paths (str), Somewhere, GitTree
    reads: list = field(default_factory=list)     # absolute paths (str) of operands and `<` files
    code: list = field(default_factory=list)      # Code
    recursive_reads: list = field(default_factory=list)   # folders read whole (grep -r, tar c, cp -r)
    notes: list = field(default_factory=list)     # why something was let through unseen


class Unknown(str):
    """A word whose value the hook cannot know ($(...), an unset variable, xargs' input)."""


UNKNOWN = Unknown("<unknown>")
FRESH = os.path.join(os.environ.get("TMPDIR") or "/tmp", "<a new file from mktemp>")


def known(value):
    """True for a value the hook knows (text), False for None and UNKNOWN."""
    return isinstance(value, str) and not isinstance(value, Unknown)


# ------------------------------------------------------------------ words

@dataclass
class Token:
    text: str
    quoted: bool = False       # some part of it was quoted or escaped
    literal: bool = False      # wholly in single quotes: no expansion at all
    op: bool = False           # an unquoted shell operator
    raw: str = ""


def _split_operator(text):
    """`)>` or `;;&` as shlex returns them (punctuation runs) cut into bash's operators."""
    out = []
    while text:
        for op in OPERATORS:
            if text.startswith(op):
                out.append(op)
                text = text[len(op):]
                break
        else:
            out.append(text[0])
            text = text[1:]
    return out


COMMENT_AFTER = set(" \t\n;&|(<>")   # an unquoted `#` right after one of these starts a comment
ANSI_C = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
          "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def strip_comments(text):
    """`text` as shlex can read it the way bash does: without its comments (an unquoted `#` that
    starts a word, up to the end of the line; after a subshell's `)` too, not after `$(...)`),
    and with each `$'...'` string written as the plain '...' string it stands for. Quotes are
    followed ('...', $'...', "...", and $(...) or backticks inside "..."), so an apostrophe in a
    comment opens no quote and `$'a\\' #'` is one word. None where the quoting cannot be followed
    to the end (`analyse` then takes a `#` word as a comment, as before)."""
    out, stack, i, n = [], [], 0, len(text)
    closed_subshell = -1   # where a `)` ended a subshell (an operator: `#` after it starts a comment)
    while i < n:
        c, top = text[i], (stack[-1] if stack else None)
        if c == "\\":
            out.append(text[i:i + 2])
            i += 2
            continue
        if top == '"':
            if c == '"':
                stack.pop()
            elif text.startswith("$(", i):
                stack.append(")")
                out.append("$(")
                i += 2
                continue
            elif c == "`":
                stack.append("`")
            out.append(c)
            i += 1
            continue
        if c == "'" or text.startswith("$'", i):
            j = _quote_end(text, i)
            if j < 0:
                return None
            out.append(text[i:j] if c == "'" else _ansi_c(text[i + 2:j - 1]))
            i = j
            continue
        if c == "#" and (i == 0 or text[i - 1] in COMMENT_AFTER or i - 1 == closed_subshell):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == '"':
            stack.append('"')
        elif text.startswith("$(", i):
            stack.append(")")
            out.append("$(")
            i += 2
            continue
        elif c == "(" and top == ")":
            stack.append(")")
        elif c == ")" and top == ")":
            stack.pop()
        elif c == ")" and not stack:
            closed_subshell = i
        elif c == "`":
            if top == "`":
                stack.pop()
            else:
                stack.append("`")
        out.append(c)
        i += 1
    return None if stack else "".join(out)


def _quote_end(text, i):
    """The index just past the single-quoted string at `i` ('...' or $'...' with its escapes), -1 if open."""
    if text[i] == "'":
        j = text.find("'", i + 1)
        return -1 if j < 0 else j + 1
    j = i + 2
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == "'":
            return j + 1
        j += 1
    return -1


def _ansi_c(body):
    """The '...' string that bash's $'body' stands for (\\n, \\', \\xHH, \\NNN octal...)."""
    def one(match):
        esc = match.group(1)
        if esc[0] in ANSI_C:
            return ANSI_C[esc[0]]
        if esc[0] in "xuU":
            return chr(int(esc[1:], 16)) if len(esc) > 1 else "\\" + esc
        if esc[0] in "01234567":
            return chr(int(esc, 8) & 0xFF)
        if esc[0] == "c" and len(esc) > 1:
            return chr(ord(esc[1]) & 0x1F)
        return "\\" + esc
    value = re.sub(r"\\(x[0-9A-Fa-f]{0,2}|u[0-9A-Fa-f]{0,4}|U[0-9A-Fa-f]{0,8}|[0-7]{1,3}|c.|.)", one, body,
                   flags=re.DOTALL)
    return "'" + value.replace("'", "'\"'\"'") + "'"


def tokens(command):
    """Words and operators of `command`, with whether each word was quoted (shlex, plus the
    source span of each token to tell a quoted `'>'` from the operator)."""
    text = command.replace("\\\n", "").replace("\r\n", "\n").replace("\n", f" {NEWLINE} ")
    stream = io.StringIO(text)
    lexer = shlex.shlex(stream, posix=True, punctuation_chars="();<>|&")
    lexer.whitespace_split = True
    lexer.commenters = ""
    out, start = [], 0
    while True:
        value = lexer.get_token()
        if value is None or value == lexer.eof:
            break
        end = stream.tell() - len(lexer._pushback_chars)   # noqa: SLF001 - the span of this token
        raw = text[start:end].strip()
        start = end
        if value == NEWLINE and raw == NEWLINE:
            out.append(Token(NEWLINE, op=True, raw=raw))
            continue
        value = value.replace(NEWLINE, "\n").replace("\n \n", "\n")
        quoted = any(c in raw for c in "'\"\\")
        if not quoted and value and all(c in "();<>|&" for c in value):
            out.extend(Token(op, op=True, raw=op) for op in _split_operator(value))
            continue
        out.append(Token(value, quoted=quoted, literal=raw.startswith("'") and raw.endswith("'") and
                         raw.count("'") == 2, raw=raw))
    return out


HEREDOC = re.compile(r"(?<![<\w])<<(-?)[ \t]*(['\"]?)([A-Za-z0-9_.\-]+)\2")


def split_heredocs(command):
    """(the command without heredoc bodies, the bodies in order)."""
    lines = command.split("\n")
    kept, bodies, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for match in HEREDOC.finditer(line):
            strip_tabs, delimiter = match.group(1) == "-", match.group(3)
            body = []
            while i < len(lines):
                candidate = lines[i].lstrip("\t") if strip_tabs else lines[i]
                i += 1
                if candidate == delimiter:
                    break
                body.append(lines[i - 1])
            bodies.append("\n".join(body) + "\n")
    return "\n".join(kept), bodies


def substitutions(text):
    """The commands inside $(...) and backticks of a word (nested ones come out later)."""
    found, i = [], 0
    while i < len(text):
        if text.startswith("$(", i) and not text.startswith("$((", i):
            depth, j = 1, i + 2
            while j < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            found.append(text[i + 2:j - 1])
            i = j
        elif text[i] == "`":
            j = text.find("`", i + 1)
            if j < 0:
                break
            found.append(text[i + 1:j])
            i = j + 1
        else:
            i += 1
    return found


# ${NAME<op>...} other than a plain ${NAME}, and ${NAME[...]} (arrays): values the hook does not compute.
MODIFIED = re.compile(r"\$\{(?:[!#]?[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\]|[:#%/^,@][^}]*)|[!#][^}]*)\}")
BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def braces(text, limit=64):
    """bash's brace expansion of an unquoted word: `a{b,c}d` -> abd acd, `{1..3}` -> 1 2 3."""
    match = BRACES.search(text)
    if not match:
        return [text]
    body = match.group(0)[1:-1]
    if ".." in body and "," not in body:
        lo, _, hi = body.partition("..")
        if lo.lstrip("-").isdigit() and hi.lstrip("-").isdigit():
            step = 1 if int(hi) >= int(lo) else -1
            parts = [str(i) for i in range(int(lo), int(hi) + step, step)][:limit]
        elif len(lo) == 1 and len(hi) == 1:
            step = 1 if ord(hi) >= ord(lo) else -1
            parts = [chr(i) for i in range(ord(lo), ord(hi) + step, step)][:limit]
        else:
            parts = [match.group(0)]
    else:
        parts = body.split(",")
    out = []
    for part in parts:
        out += braces(text[:match.start()] + part + text[match.end():], limit)
        if len(out) >= limit:
            break
    return out[:limit]


VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:[:#%/^,@][^}]*)?\}|([A-Za-z_][A-Za-z0-9_]*)|([0-9@*#?$!-]))")


class Shell:
    """What bash knows while it reads the command: the folder and the variables set so far."""

    def __init__(self, cwd, variables=None, depth=0):
        self.cwd = cwd
        self.vars = dict(variables or {})
        self.depth = depth
        self.links = {}    # symbolic links made earlier in this command: link -> target

    def values(self, token):
        """The possible values of a word: several for a `for` variable, UNKNOWN when not knowable."""
        if isinstance(token, Unknown):
            return [token]
        text = token.text
        if token.literal:
            return [text]
        inner = substitutions(text)
        if inner and all(i.strip().startswith("mktemp") and not re.search(r"[;&|<>`]|\$\(", i) for i in inner) \
                and re.fullmatch(r"\$\(.*\)|`.*`", text):
            return [FRESH]   # mktemp only ever makes a new file
        if inner or ("$(" in text) or ("`" in text):
            return [UNKNOWN]
        if MODIFIED.search(text):
            return [UNKNOWN]   # ${f/X/a}, ${a[0]}, ${f:0:3}, ${!p}: bash computes the name
        if token.quoted and BRACES.search(text):
            return [UNKNOWN]   # part quoted, part expanded: not worth following
        results = braces(text)
        for _ in range(4):   # a value holding another $VAR
            expanded = []
            for value in results:
                match = VARIABLE.search(value)
                if not match:
                    expanded.append(value)
                    continue
                name = match.group(1) or match.group(2)
                known = self.vars.get(name) if name else None
                if known is None and name and name in os.environ:
                    known = [os.environ[name]]
                if known is None or any(isinstance(k, Unknown) for k in known):
                    return [UNKNOWN]   # NAME=$(cmd) and the like: the output is not knowable
                expanded += [value[:match.start()] + k + value[match.end():] for k in known]
            results = expanded
        if any(VARIABLE.search(v) or "${" in v for v in results):
            return [UNKNOWN]
        return [os.path.expanduser(v) if v.startswith("~") else v for v in results]

    def path(self, value):
        return os.path.normpath(os.path.join(self.cwd, value))


# ------------------------------------------------------------------ commands

@dataclass
class Segment:
    words: list          # Token or Unknown
    stdin: object = None  # text fed on stdin when known; UNKNOWN for a pipe from something unknown
    piped_in: bool = False


def analyse(command, cwd, effects=None, shell=None):
    """The Effects of a whole command line (raises ValueError when shlex cannot read it)."""
    effects = effects if effects is not None else Effects()
    shell = shell or Shell(cwd)
    if shell.depth > MAX_DEPTH:
        effects.writes.append(Somewhere(shell.cwd, None, "commands nested too deep to follow"))
        return effects
    text, bodies = split_heredocs(command)
    stripped = strip_comments(text)
    unstripped, text = stripped is None, text if stripped is None else stripped
    for word_text in _substitution_sources(text):
        analyse(word_text, shell.cwd, effects, Shell(shell.cwd, shell.vars, shell.depth + 1))
    words = tokens(text)
    stack, current, previous_out, comment = [], [], None, False
    pending_pipe = False
    for tok in words + [Token(NEWLINE, op=True)]:
        if comment:
            if tok.op and tok.text == NEWLINE:
                comment = False
            else:
                continue
        if unstripped and not tok.op and not tok.quoted and tok.text.startswith("#") and not current:
            comment = True
            continue
        if unstripped and not tok.op and not tok.quoted and tok.text.startswith("#") and current:
            comment = True   # bash: a word starting with # ends the line there
            tok = Token(NEWLINE, op=True)
        if tok.op and tok.text in ("(", "<(", ">("):
            glued = None   # NAME=$( ... ) unquoted: the word is rebuilt with its command at ")"
            if current and isinstance(current[-1], Token) and current[-1].text == "$":
                current[-1] = UNKNOWN   # $( ... ): the value is the output of the inner command
            elif current and isinstance(current[-1], Token) and not current[-1].quoted \
                    and current[-1].text.endswith("$") and tok.text == "(":
                glued = [current[-1].text[:-1], True]   # [text before "$", inner is one command]
            if tok.text != "(":
                current.append(UNKNOWN)   # <(...) / >(...) stands for a path we cannot name
            stack.append((current, shell.cwd, pending_pipe, glued))
            current, pending_pipe = [], False
            continue
        if tok.op and tok.text == ")":
            inner = current
            previous_out = _run_segment(Segment(current, piped_in=pending_pipe,
                                                stdin=previous_out if pending_pipe else None),
                                        shell, effects, bodies)
            if stack:
                current, cwd_before, pending_pipe, glued = stack.pop()
                shell.cwd = cwd_before
                if glued:
                    current[-1] = _glued_word(glued, inner)
            else:
                current = []
            continue
        if tok.op and tok.text in SEPARATORS:
            if stack and stack[-1][3]:
                stack[-1][3][1] = False   # $( a; b ): more than one command, its output unknown
            if current:
                out = _run_segment(Segment(current, piped_in=pending_pipe,
                                           stdin=previous_out if pending_pipe else None), shell, effects, bodies)
            else:
                out = None
            pending_pipe = tok.text in ("|", "|&")
            previous_out = out
            current = []
            continue
        current.append(tok)
    return effects


def _substitution_sources(text):
    """Commands in $(...)/backticks inside quoted words (unquoted ones are read in place)."""
    found = []
    for match in re.finditer(r'"([^"\\]|\\.)*"', text):
        found += substitutions(match.group(0))
    for match in re.finditer(r"`[^`]*`", text):
        if not any(match.start() > m.start() and match.end() <= m.end()
                   for m in re.finditer(r'"([^"\\]|\\.)*"', text)):
            found += substitutions(match.group(0))
    return found


def _run_segment(segment, shell, effects, bodies):
    """Follow one simple command; return what it prints when that is known (for a pipe)."""
    words, stdin = _redirections(segment, shell, effects, bodies)
    words = [w for w in words if not (isinstance(w, Token) and w.text in KEYWORDS and not w.quoted)]
    if not words:
        return None
    first = words[0]
    if isinstance(first, Token) and first.text == "for" and len(words) >= 2:
        name = words[1].text
        items = [v for w in words[3:] for v in _glob_values(shell, w)] if len(words) > 2 else [UNKNOWN]
        shell.vars[name] = [UNKNOWN] if any(isinstance(v, Unknown) for v in items) else items
        return None
    if isinstance(first, Token) and first.text == "case":
        return None
    words = _assignments(words, shell)
    if not words:
        return None
    return _command(words, stdin, shell, effects)


def _redirections(segment, shell, effects, bodies):
    words, stdin = [], segment.stdin if segment.piped_in else None
    if segment.piped_in and stdin is None:
        stdin = UNKNOWN
    items = segment.words
    i = 0
    while i < len(items):
        tok = items[i]
        nxt = items[i + 1] if i + 1 < len(items) else None
        if isinstance(tok, Token) and tok.op:
            if tok.text in OUTPUT_REDIRECTS or (tok.text == ">&" and nxt is not None
                                                and not _is_fd(nxt)):
                if nxt is not None:
                    for value in shell.values(nxt):
                        _write(effects, shell, value, "a redirection to an unknown file")
                i += 2
                continue
            if tok.text == "<" and nxt is not None:
                for value in shell.values(nxt):
                    if not isinstance(value, Unknown):
                        effects.reads.append(shell.path(value))
                        stdin = _read_small(shell.path(value))
                i += 2
                continue
            if tok.text in ("<<", "<<-"):
                stdin = bodies.pop(0) if bodies else UNKNOWN
                i += 2
                continue
            if tok.text == "<<<" and nxt is not None:
                values = shell.values(nxt)
                stdin = values[0] if values and not isinstance(values[0], Unknown) else UNKNOWN
                i += 2
                continue
            i += 2 if tok.text in (">&", "<&") else 1
            continue
        if isinstance(tok, Token) and tok.text.isdigit() and not tok.quoted and nxt is not None \
                and isinstance(nxt, Token) and nxt.op and nxt.text in OUTPUT_REDIRECTS | {">&", "<&", "<"} \
                and not tok.raw.endswith((" ", "\t")):
            i += 1   # the fd number of `2>file`
            continue
        words.append(tok)
        i += 1
    return words, stdin


def _is_fd(token):
    return isinstance(token, Token) and (token.text.isdigit() or token.text == "-")


def _glued_word(glued, inner):
    """The word `prefix$(inner)` once its command is read: `NAME=$(mktemp ...)` names a new file,
    any other command's output is unknown (Shell.values decides from the rebuilt text)."""
    prefix, single = glued
    if single and inner and isinstance(inner[0], Token) and inner[0].text == "mktemp":
        return Token(prefix + "$(mktemp)")
    return Token(prefix + "$(...)")


def _assignments(words, shell):
    """Drop (and remember) NAME=value words before the command; `export`/`declare` set them too."""
    rest = list(words)
    while rest:
        head = rest[0]
        if isinstance(head, Token) and head.text in ("export", "declare", "local", "readonly", "typeset") \
                and not head.quoted:
            assigns = [w for w in rest[1:] if isinstance(w, Token) and _is_assignment(w.text)]
            for w in assigns:
                _assign(w, shell)
            return []
        if isinstance(head, Token) and _is_assignment(head.text):
            _assign(head, shell)
            rest = rest[1:]
            continue
        break
    return rest


def _is_assignment(text):
    return re.match(r"^[A-Za-z_][A-Za-z0-9_]*\+?=", text) is not None


def _assign(token, shell):
    name, _, value = token.text.partition("=")
    value_token = Token(value, quoted=token.quoted, literal=token.literal)
    values = shell.values(value_token)
    shell.vars[name.rstrip("+")] = values if not any(isinstance(v, Unknown) for v in values) else None
    if shell.vars[name.rstrip("+")] is None:
        shell.vars[name.rstrip("+")] = [UNKNOWN]


def _glob_values(shell, token):
    """Values of an operand with globs expanded against the disk (as bash does)."""
    out = []
    for value in shell.values(token):
        if isinstance(value, Unknown) or (isinstance(token, Token) and token.quoted) or not _has_magic(value):
            out.append(value)
            continue
        import glob
        matches = sorted(glob.glob(shell.path(value)))
        out += matches or [value]
    return out


def _has_magic(value):
    return any(c in value for c in "*?[")


def _write(effects, shell, value, why, pattern=None):
    if isinstance(value, Unknown):
        effects.writes.append(Somewhere(shell.cwd, pattern, why))
    elif not isinstance(value, str):
        return
    elif _has_magic(value):
        import glob
        full = shell.path(value)
        matches = glob.glob(full)
        effects.writes.extend(matches or [])
        effects.writes.append(Somewhere(os.path.dirname(full) or shell.cwd, os.path.basename(full),
                                        f"files matching {value}"))
    else:
        path = shell.path(value)
        effects.writes.append(path)
        if path in shell.links:
            effects.writes.append(shell.links[path])


def _read_small(path):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCRIPT_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError):
        return None   # nothing there to run: the command fails
    except OSError:
        return UNKNOWN
    if len(data) > MAX_SCRIPT_BYTES:
        return UNKNOWN
    return data.decode("utf-8", "replace")


def _name(token):
    if isinstance(token, Unknown):
        return ""
    return os.path.basename(token.text)


def _strip_prefixes(words, shell, effects):
    """Drop wrappers (sudo, env, nice, timeout...) and return the command they run."""
    while words:
        name = _name(words[0])
        if name == "uv" and len(words) > 1 and words[1].text == "run":
            words = _after_options(words[2:], OPTIONS_WITH_VALUE["uv"])
            continue
        if name in ("poetry", "pipenv", "pdm", "hatch", "rye") and len(words) > 1 and words[1].text == "run":
            words = words[2:]
            continue
        if name not in PREFIXES:
            return words
        rest = words[1:]
        takes = PREFIX_OPTIONS_WITH_VALUE.get(name, set())
        while rest and isinstance(rest[0], Token) and (rest[0].text.startswith("-") or
                                                        (name == "env" and _is_assignment(rest[0].text))):
            flag = rest[0].text
            if name == "env" and flag in ("-C", "--chdir") and len(rest) > 1:
                shell.cwd = shell.path(rest[1].text)
            if name == "env" and _is_assignment(flag):
                _assign(rest[0], shell)
            split = _env_split(flag, rest) if name == "env" else None
            if split is not None:
                try:
                    words = [Token(w) for w in shlex.split(split[0])] + split[1]
                except ValueError:
                    effects.writes.append(Somewhere(shell.cwd, None, "env -S with a string the hook cannot split"))
                    return []
                rest = None
                break
            rest = rest[2:] if flag in takes else rest[1:]
        if rest is None:      # env -S: its string is the command now
            continue
        if name == "timeout" and rest:
            rest = rest[1:]   # the duration
        if name == "flock" and rest:
            rest = rest[1:]   # the lock file
        if name == "nice" and rest and rest[0].text.lstrip("-+").isdigit():
            rest = rest[1:]
        words = rest
    return words


def _env_split(flag, rest):
    """(the string, the words after it) of `env -S STRING` / `--split-string=STRING`, else None."""
    if flag in ("-S", "--split-string") and len(rest) > 1 and isinstance(rest[1], Token):
        return rest[1].text, rest[2:]
    if flag.startswith("--split-string="):
        return flag.split("=", 1)[1], rest[1:]
    if flag.startswith("-S") and len(flag) > 2:
        return flag[2:], rest[1:]
    return None


def _after_options(words, takes):
    rest = list(words)
    while rest and isinstance(rest[0], Token) and rest[0].text.startswith("-") and rest[0].text != "-":
        rest = rest[2:] if rest[0].text in takes else rest[1:]
    return rest


def _operands(args, takes=()):
    """(operands, {option: value}) of GNU-style arguments; `--` ends the options."""
    operands, options, i, ended = [], {}, 0, False
    while i < len(args):
        arg = args[i]
        text = arg.text if isinstance(arg, Token) else arg
        if ended or isinstance(arg, Unknown) or not text.startswith("-") or text == "-":
            operands.append(arg)
        elif text == "--":
            ended = True
        elif "=" in text and text.startswith("--"):
            key, _, value = text.partition("=")
            options.setdefault(key, []).append(Token(value, quoted=arg.quoted))
        elif text in takes and i + 1 < len(args):
            options.setdefault(text, []).append(args[i + 1])
            i += 1
        elif not text.startswith("--") and len(text) > 2:
            for k, letter in enumerate(text[1:], start=1):   # -qO FILE, -oFILE, -xzf FILE
                flag = "-" + letter
                if flag in takes:
                    if text[k + 1:]:
                        options.setdefault(flag, []).append(Token(text[k + 1:], quoted=arg.quoted))
                    elif i + 1 < len(args):
                        options.setdefault(flag, []).append(args[i + 1])
                        i += 1
                    break
                options.setdefault(flag, []).append(None)
            options.setdefault(text, []).append(None)
        else:
            options.setdefault(text, []).append(None)
        i += 1
    return operands, options


def _flag(options, *names):
    """True when one of `names` was given (single-letter flags also inside a -xyz cluster)."""
    for key in options:
        if key in names:
            return True
        if key.startswith("-") and not key.startswith("--"):
            if any(len(n) == 2 and n[1] in key[1:] for n in names if n.startswith("-") and not n.startswith("--")):
                return True
    return False


def _command(words, stdin, shell, effects):
    words = _strip_prefixes(words, shell, effects)
    if not words:
        return None
    name, args = _name(words[0]), words[1:]
    if isinstance(words[0], Unknown):
        effects.writes.append(Somewhere(shell.cwd, None, "a command whose name is not known until it runs"))
        return None
    handler = HANDLERS.get(name)
    if handler is None:
        if re.match(r"^python[0-9.]*$", name):
            handler = _interpreter
        elif name.startswith("./") or words[0].text.startswith(("./", "/")) and name.endswith(".sh"):
            handler = _script
    if words[0].text.startswith("./") and name.endswith(".sh"):
        handler = _script
    result = handler(name, args, stdin, shell, effects, words[0]) if handler else None
    _operand_reads(args, shell, effects, name)
    return result


def _operand_reads(args, shell, effects, name):
    recursive = name in ("rg", "ag", "tar", "zip", "rsync", "scp") or any(
        isinstance(a, Token) and (a.text in ("-r", "-R", "--recursive", "-a") or
                                  (a.text.startswith("-") and not a.text.startswith("--") and
                                   ("r" in a.text or "R" in a.text)))
        for a in args)
    for arg in args:
        if isinstance(arg, Unknown) or not isinstance(arg, Token):
            continue
        for value in _glob_values(shell, arg):
            if isinstance(value, Unknown) or value.startswith("-") and not value.startswith("-/"):
                continue
            for part in value.split("=", 1)[-1:] if value.startswith("--") else [value]:
                full = shell.path(part)
                effects.reads.append(full)
                if recursive:
                    effects.recursive_reads.append(full)


# -- the writers


def _cd(name, args, stdin, shell, effects, head):
    operands = [a for a in args if not (isinstance(a, Token) and a.text.startswith("-"))]
    target = shell.values(operands[0])[0] if operands else os.path.expanduser("~")
    if not isinstance(target, Unknown):
        shell.cwd = shell.path(target)
    return None


def _removers(name, args, stdin, shell, effects, head):
    if name == "chmod":   # -w, -x are modes there, not options
        args = [a for a in args if not (isinstance(a, Token) and a.text in ("-R", "-v", "-c", "-f"))]
        args = [Token("--")] + args if not any(isinstance(a, Token) and a.text.startswith("--") for a in args) else args
    operands, options = _operands(args, OPTIONS_WITH_VALUE.get(name, set()))
    if name in ("chmod", "chown", "chgrp", "setfacl") and operands and "--reference" not in options:
        operands = operands[1:]   # the mode or owner
    if name == "chattr":
        operands = [o for o in operands if not o.text.startswith(("+", "="))] if operands else []
    if name in ("gzip", "bzip2", "xz", "zstd", "gunzip", "bunzip2", "unxz", "lzma") and (
            _flag(options, "-c", "--stdout", "-k", "--keep", "-l", "--list", "-t", "--test")):
        return None
    if name == "tee":
        for operand in operands:
            for value in shell.values(operand):
                _write(effects, shell, value, "tee into an unknown file")
        return stdin
    for operand in operands:
        for value in shell.values(operand):
            _write(effects, shell, value, f"{name} of an unknown file")
    return None


def _copiers(name, args, stdin, shell, effects, head):
    """cp/mv/install/ln SRC... DEST (DEST/basename(SRC) into a folder); -t DIR; mv also removes SRC."""
    takes = OPTIONS_WITH_VALUE.get(name, set()) | {"-t", "--target-directory"}
    operands, options = _operands(args, takes)
    target_dir = (options.get("-t") or options.get("--target-directory") or [None])[-1]
    if name == "install" and _flag(options, "-d", "--directory"):
        return None
    if target_dir is not None:
        sources, dest, into = operands, target_dir, True
    elif len(operands) >= 2:
        sources, dest = operands[:-1], operands[-1]
        into = not _flag(options, "-T", "--no-target-directory") and _is_dir(shell, dest)
    else:
        return None
    for dest_value in shell.values(dest):
        for source in sources:
            for value in shell.values(source):
                if isinstance(dest_value, Unknown):
                    _write(effects, shell, UNKNOWN, f"{name} into an unknown place")
                elif into:
                    base = UNKNOWN if isinstance(value, Unknown) else os.path.basename(value.rstrip("/"))
                    if isinstance(base, Unknown):
                        effects.writes.append(Somewhere(shell.path(dest_value), None, f"{name} of unknown files"))
                    else:
                        _write(effects, shell, os.path.join(dest_value, base), "")
                        if _flag(options, "-r", "-R", "-a", "--recursive", "--archive"):
                            effects.recursive_reads.append(shell.path(value))
                else:
                    _write(effects, shell, dest_value, "")
                if name == "mv":
                    _write(effects, shell, value, "mv of an unknown file")
    if name == "ln":
        _links(sources, dest, into, options, shell, effects)
    return None


def _links(sources, dest, into, options, shell, effects):
    """A hard link to a file shares its content: making one counts as writing the file. A symbolic
    link made in this command is remembered, so a later write through it in the same command
    counts as a write of its target (the hook cannot resolve a link that does not exist yet)."""
    symbolic = _flag(options, "-s", "--symbolic")
    for source in sources:
        for value in shell.values(source):
            if isinstance(value, Unknown):
                continue
            for dest_value in shell.values(dest):
                if isinstance(dest_value, Unknown):
                    continue
                link = shell.path(os.path.join(dest_value, os.path.basename(value)) if into else dest_value)
                target = os.path.normpath(os.path.join(os.path.dirname(link), value)) if symbolic \
                    else shell.path(value)
                if symbolic:
                    shell.links[link] = target
                else:
                    effects.writes.append(target)


def _is_dir(shell, token):
    values = shell.values(token)
    return any(not isinstance(v, Unknown) and (v.endswith("/") or os.path.isdir(shell.path(v))) for v in values)


def _rsync(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, OPTIONS_WITH_VALUE["rsync"] | {"--backup-dir", "--log-file"})
    if len(operands) < 2:
        return None
    dest = operands[-1]
    for value in shell.values(dest):
        if isinstance(value, Unknown) or ":" in value.split("/")[0]:
            continue   # remote
        effects.writes.append(Somewhere(shell.path(value), None, "rsync into this folder"))
        effects.writes.append(shell.path(value))
    if _flag(options, "--remove-source-files"):
        for source in operands[:-1]:
            for value in shell.values(source):
                _write(effects, shell, value, "rsync --remove-source-files")
    return None


def _dd(name, args, stdin, shell, effects, head):
    for arg in args:
        if isinstance(arg, Token) and arg.text.startswith("of="):
            for value in shell.values(Token(arg.text[3:], quoted=arg.quoted, literal=arg.literal)):
                _write(effects, shell, value, "dd of= an unknown file")
    return None


def _sed(name, args, stdin, shell, effects, head):
    in_place = any(isinstance(a, Token) and (a.text.startswith("--in-place") or
                                             (a.text.startswith("-") and not a.text.startswith("--")
                                              and "i" in a.text.split("e")[0]))
                   for a in args)
    operands, options = _operands(args, OPTIONS_WITH_VALUE["sed"])
    if not (options.get("-e") or options.get("--expression") or options.get("-f") or options.get("--file")):
        operands = operands[1:]   # the script
    if in_place:
        for operand in operands:
            for value in _glob_values(shell, operand):
                _write(effects, shell, value, "sed -i on an unknown file")
    _sed_w_commands(args, shell, effects)
    return None if in_place else stdin


def _sed_w_commands(args, shell, effects):
    """sed's own `w FILE` command writes FILE."""
    for arg in args:
        if isinstance(arg, Token):
            for match in re.finditer(r"(?:^|[;\n}/])\s*w\s+([^;\n}]+)", arg.text):
                _write(effects, shell, match.group(1).strip(), "")


def _perl(name, args, stdin, shell, effects, head):
    in_place = any(isinstance(a, Token) and re.match(r"^-[a-zA-Z]*i", a.text) for a in args)
    operands, options = _operands(args, {"-e", "-E", "-M", "-m", "-I", "-l", "-0"})
    code = [c.text for key in ("-e", "-E") for c in options.get(key, []) if isinstance(c, Token)]
    if not code and operands and not in_place:
        return _interpreter(name, args, stdin, shell, effects, None)
    if not code and operands:
        operands = operands[1:]
    if in_place:
        for operand in operands:
            for value in _glob_values(shell, operand):
                _write(effects, shell, value, "perl -i on an unknown file")
    for text in code:
        effects.code.append(Code(shell.cwd, text, "perl"))
    _clustered_code(args, shell, effects, "perl")
    return None


def _clustered_code(args, shell, effects, language):
    """`perl -pie 'code'` or `-ne`: the code is the word after the cluster."""
    for i, arg in enumerate(args[:-1]):
        if isinstance(arg, Token) and re.match(r"^-[a-zA-Z]+e$", arg.text) and len(arg.text) > 2:
            nxt = args[i + 1]
            if isinstance(nxt, Token):
                effects.code.append(Code(shell.cwd, nxt.text, language))


def _awk(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, OPTIONS_WITH_VALUE["awk"] | {"-i", "--include"})
    includes = [v.text for v in options.get("-i", []) + options.get("--include", []) if isinstance(v, Token)]
    program = None
    if not options.get("-f") and operands:
        program, operands = operands[0], operands[1:]
    if program is not None and isinstance(program, Token):
        effects.code.append(Code(shell.cwd, program.text, "awk"))
    if "inplace" in includes or any(i.endswith("inplace") for i in includes):
        for operand in operands:
            for value in _glob_values(shell, operand):
                _write(effects, shell, value, "awk -i inplace on an unknown file")
    return stdin


def _sort(name, args, stdin, shell, effects, head):
    _, options = _operands(args, OPTIONS_WITH_VALUE["sort"] | {"-o", "--output"})
    for value_token in options.get("-o", []) + options.get("--output", []):
        if value_token is not None:
            for value in shell.values(value_token):
                _write(effects, shell, value, "sort -o to an unknown file")
    return None


def _uniq(name, args, stdin, shell, effects, head):
    operands, _ = _operands(args, {"-f", "-s", "-w"})
    if len(operands) >= 2:
        for value in shell.values(operands[1]):
            _write(effects, shell, value, "uniq into an unknown file")
    return None


def _formatter(name, args, stdin, shell, effects, head):
    """ruff format / ruff check --fix write their operands (default: the whole folder)."""
    operands, options = _operands(args, {"--config", "--select", "--ignore", "--line-length", "--target-version"})
    sub = operands[0].text if operands and isinstance(operands[0], Token) else ""
    if sub == "format" or (sub == "check" and _flag(options, "--fix")) or (not sub and _flag(options, "--fix")):
        targets = operands[1:] if sub else operands
        for operand in targets or [Token(".")]:
            for value in shell.values(operand):
                _write(effects, shell, value, "a formatter on unknown files")
    return None


def _editors_with_code(name, args, stdin, shell, effects, head):
    operands, _ = _operands(args, {"-c", "-S", "-u", "--cmd"})
    for operand in operands:
        for value in shell.values(operand):
            _write(effects, shell, value, f"{name} on an unknown file")
    return None


def _find(name, args, stdin, shell, effects, head):
    roots, i = [], 0
    while i < len(args) and isinstance(args[i], Token) and not args[i].text.startswith(("-", "(", "!")):
        roots.append(args[i])
        i += 1
    root_paths = []
    for root in roots or [Token(".")]:
        for value in shell.values(root):
            root_paths.append(shell.cwd if isinstance(value, Unknown) else shell.path(value))
    rest = args[i:]
    patterns = [rest[j + 1].text for j, a in enumerate(rest[:-1])
                if isinstance(a, Token) and a.text in ("-name", "-iname") and isinstance(rest[j + 1], Token)]
    pattern = patterns[0] if len(patterns) == 1 else None
    j = 0
    while j < len(rest):
        word = rest[j].text if isinstance(rest[j], Token) else ""
        if word == "-delete":
            for base in root_paths:
                effects.writes.append(Somewhere(base, pattern, "find -delete"))
        elif word in ("-fprint", "-fprint0", "-fprintf", "-fls") and j + 1 < len(rest):
            for value in shell.values(rest[j + 1]):
                _write(effects, shell, value, f"find {word}")
        elif word in ("-exec", "-execdir", "-ok", "-okdir"):
            k = j + 1
            inner = []
            while k < len(rest) and not (isinstance(rest[k], Token) and rest[k].text in (";", "+")):
                inner.append(rest[k])
                k += 1
            found = [w for w in inner if isinstance(w, Token) and "{}" in w.text]
            inner = [UNKNOWN if (isinstance(w, Token) and "{}" in w.text) else w for w in inner]
            sub = Effects()
            if inner:
                _command(inner, None, Shell(shell.cwd, shell.vars, shell.depth + 1), sub)
            for write in sub.writes:
                if isinstance(write, Somewhere) and found:
                    for base in root_paths:
                        effects.writes.append(Somewhere(base, pattern, f"find {word} ... {{}}"))
                else:
                    effects.writes.append(write)
            effects.code += sub.code
            j = k
        j += 1
    return None


def _xargs(name, args, stdin, shell, effects, head):
    takes = OPTIONS_WITH_VALUE["xargs"]
    rest, replace = list(args), None
    while rest and isinstance(rest[0], Token) and rest[0].text.startswith("-"):
        flag = rest[0].text
        if flag in ("-I", "--replace") and len(rest) > 1:
            replace = rest[1].text
        elif flag.startswith("-I") and len(flag) > 2:
            replace = flag[2:]
        elif flag in ("-i",) or flag.startswith("--replace="):
            replace = flag.partition("=")[2] or "{}"
        rest = rest[2:] if flag in takes else rest[1:]
    if not rest:
        rest = [Token("echo")]
    if known(stdin):
        items = [Token(w) for w in shlex.split(stdin, comments=False)] if stdin.strip() else []
    else:
        items = [UNKNOWN]
    if replace:
        inner = [UNKNOWN if (isinstance(w, Token) and replace in w.text) else w for w in rest]
        if known(stdin):
            inner = [w for item in items for w in
                     [Token(x.text.replace(replace, item.text)) if isinstance(x, Token) and replace in x.text
                      else x for x in rest]]
    else:
        inner = rest + items
    return _command(inner, None, Shell(shell.cwd, shell.vars, shell.depth + 1), effects)


def _shell(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, {"-c", "-o", "-O", "--rcfile", "--init-file"})
    inner = Shell(shell.cwd, shell.vars, shell.depth + 1)
    codes = [c for c in options.get("-c", []) if isinstance(c, Token)]
    clustered = [a for a in args if isinstance(a, Token) and re.match(r"^-[a-zA-Z]*c[a-zA-Z]*$", a.text)
                 and a.text != "-c"]
    if clustered and operands:
        codes.append(operands[0])
        operands = []
    if codes:
        for code in codes:
            for value in shell.values(code):
                if isinstance(value, Unknown):
                    effects.writes.append(Somewhere(shell.cwd, None, f"{name} -c with a command not known yet"))
                else:
                    analyse(value, shell.cwd, effects, inner)
        return None
    if operands and operands[0].text not in ("-", "-s"):
        for value in shell.values(operands[0]):
            script = UNKNOWN if isinstance(value, Unknown) else _read_small(shell.path(value))
            _script_text(script, name, shell, effects, inner)
        return None
    _script_text(stdin, name, shell, effects, inner)
    return None


def _script_text(text, name, shell, effects, inner):
    if text is None:
        return
    if isinstance(text, Unknown):
        effects.writes.append(Somewhere(shell.cwd, None, f"{name} running commands it reads at run time"))
        return
    try:
        analyse(text, shell.cwd, effects, inner)
    except ValueError:
        effects.writes.append(Somewhere(shell.cwd, None, f"a {name} script the hook cannot read"))


def _source(name, args, stdin, shell, effects, head):
    if args:
        for value in shell.values(args[0]):
            script = UNKNOWN if isinstance(value, Unknown) else _read_small(shell.path(value))
            _script_text(script, name, shell, effects, Shell(shell.cwd, shell.vars, shell.depth + 1))
    return None


def _script(name, args, stdin, shell, effects, head):
    path = shell.path(head.text)
    script = _read_small(path)
    if known(script) and (script.startswith("#!") and re.match(r"#!.*\b(ba|z|da|k)?sh\b", script)
                                    or name.endswith(".sh")):
        _script_text(script, name, shell, effects, Shell(shell.cwd, shell.vars, shell.depth + 1))
    return None


def _eval(name, args, stdin, shell, effects, head):
    values = []
    for arg in args:
        got = shell.values(arg)
        if any(isinstance(v, Unknown) for v in got):
            effects.writes.append(Somewhere(shell.cwd, None, "eval of a command not known yet"))
            return None
        values += got
    analyse(" ".join(values), shell.cwd, effects, Shell(shell.cwd, shell.vars, shell.depth + 1))
    return None


def _interpreter(name, args, stdin, shell, effects, head):
    language = re.sub(r"[0-9.]+$", "", name) or name
    for i, arg in enumerate(args):
        if not isinstance(arg, Token):
            continue
        if arg.text in CODE_FLAGS and i + 1 < len(args):
            nxt = args[i + 1]
            if isinstance(nxt, Token):
                effects.code.append(Code(shell.cwd, nxt.text, language))
            else:
                effects.writes.append(Somewhere(shell.cwd, None, f"{name} with code not known yet"))
            return None
        if arg.text.startswith("-c") and len(arg.text) > 2 and language == "python":
            effects.code.append(Code(shell.cwd, arg.text[2:], language))
            return None
        if arg.text == "-m" or not arg.text.startswith("-"):
            if arg.text == "-" and known(stdin):
                effects.code.append(Code(shell.cwd, stdin, language))
            elif arg.text == "-" and stdin is not None:
                effects.writes.append(Somewhere(shell.cwd, None, f"{name} running a program from a pipe"))
            return None   # a script file or a module: its code is not read here
    if known(stdin):
        effects.code.append(Code(shell.cwd, stdin, language))
    elif stdin is not None:
        effects.writes.append(Somewhere(shell.cwd, None, f"{name} running a program from a pipe"))
    return None


def _make(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, OPTIONS_WITH_VALUE["make"])
    folder = shell.cwd
    for value in options.get("-C", []) + options.get("--directory", []):
        if value is not None:
            folder = os.path.normpath(os.path.join(folder, value.text))
    names = [v.text for v in options.get("-f", []) + options.get("--file", []) + options.get("--makefile", [])
             if v is not None]
    candidates = [os.path.join(folder, n) for n in names] or \
        [os.path.join(folder, n) for n in ("GNUmakefile", "makefile", "Makefile")]
    path = next((c for c in candidates if os.path.isfile(c)), None)
    if path is None:
        return None
    text = _read_small(path)
    if not known(text):
        effects.writes.append(Somewhere(folder, None, "a Makefile too large to read"))
        return None
    targets = [o.text for o in operands if isinstance(o, Token) and "=" not in o.text]
    inner = Shell(folder, shell.vars, shell.depth + 1)
    for recipe in make_recipes(text, targets):
        try:
            analyse(recipe, folder, effects, inner)
        except ValueError:
            effects.writes.append(Somewhere(folder, None, "a make recipe the hook cannot read"))
    return None


def make_recipes(text, targets):
    """The recipe lines make would run for `targets` (default: the first target) and their
    prerequisites, with $(VAR) from the Makefile's own simple assignments."""
    variables, rules, first, current = {}, {}, None, None
    for line in text.replace("\\\n", " ").split("\n"):
        if line.startswith("\t") and current is not None:
            for target in current:
                rules[target][1].append(line[1:].lstrip("@-+ \t"))
            continue
        stripped = line.split("#", 1)[0].rstrip()
        assignment = re.match(r"^\s*(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\?|:|::|\+|!)?=\s*(.*)$",
                              stripped)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2)
            current = None
            continue
        rule = re.match(r"^([^:=#\t][^:=]*?)\s*::?\s*([^=].*)?$", stripped)
        if rule and not stripped.startswith((".", "\t", "ifeq", "ifneq", "include", "-include", "define")):
            names = rule.group(1).split()
            prereq_part, _, inline = (rule.group(2) or "").partition(";")
            for target in names:
                rules.setdefault(target, ([], []))
                rules[target][0].extend(prereq_part.split())
                if inline.strip():
                    rules[target][1].append(inline.strip())
            if first is None and names and "%" not in names[0]:
                first = names[0]
            current = names
        elif rule is None and stripped.strip() == "":
            continue
        else:
            current = None
    wanted, seen, lines = list(targets) or ([first] if first else []), set(), []
    while wanted:
        target = wanted.pop(0)
        if target in seen or target not in rules:
            continue
        seen.add(target)
        prereqs, recipe = rules[target]
        wanted = prereqs + wanted
        lines += recipe
    out = []
    for line in lines:
        for _ in range(4):
            line = re.sub(r"\$[({]([A-Za-z_][A-Za-z0-9_.]*)[)}]",
                          lambda m: variables.get(m.group(1), "$UNKNOWN_MAKE_VARIABLE"), line)
        out.append(line.replace("$$", "$").replace("$@", "$UNKNOWN_MAKE_VARIABLE")
                   .replace("$<", "$UNKNOWN_MAKE_VARIABLE").replace("$^", "$UNKNOWN_MAKE_VARIABLE"))
    return out


def _git(name, args, stdin, shell, effects, head):
    rest, cwd, aliases = list(args), shell.cwd, []
    while rest and isinstance(rest[0], Token) and rest[0].text.startswith("-"):
        flag = rest[0].text
        if flag == "-C" and len(rest) > 1:
            cwd = os.path.normpath(os.path.join(cwd, rest[1].text))
        if flag == "-c" and len(rest) > 1 and isinstance(rest[1], Token):
            key, _, value = rest[1].text.partition("=")
            if key.lower().startswith("alias.") and value.lstrip().startswith("!"):
                aliases.append(value.lstrip()[1:])
        rest = rest[2:] if flag in OPTIONS_WITH_VALUE["git"] else rest[1:]
    inner = Shell(cwd, shell.vars, shell.depth + 1)
    for body in aliases:   # `git -c alias.f='!cmd' f`: git runs cmd with the shell
        if shell.depth >= MAX_DEPTH:
            effects.writes.append(Somewhere(cwd, None, "a git alias nested too deep to read"))
        else:
            analyse(body, cwd, effects, inner)
    if not rest:
        return None
    sub, args = rest[0].text, rest[1:]
    inner = Shell(cwd, shell.vars, shell.depth)
    redirect = GIT_REDIRECTS.get(sub)
    if redirect and not _git_lists_only(sub, args):
        # git reads what these change everywhere (the engine's snapshot included), or they write
        # files from a tree the hook does not follow: any protected file there counts as written.
        effects.writes.append(Somewhere(_git_top(cwd) or cwd, None, redirect))
        return None
    operands, options = _operands(args, {"-b", "-B", "--source", "-s", "-m", "--orphan", "-c", "-C",
                                         "--conflict", "-p", "--directory", "--exclude", "--include", "-x"})
    plain = [o for o in operands if isinstance(o, Token)]
    dashdash = any(isinstance(a, Token) and a.text == "--" for a in args)
    if sub in ("checkout", "restore"):
        paths = _git_paths(args) if dashdash else plain
        if sub == "restore" and _flag(options, "--staged", "-S") and not _flag(options, "--worktree", "-W"):
            return None
        if sub == "checkout" and not dashdash and len(plain) == 1 and _is_rev(cwd, plain[0].text) \
                and not os.path.exists(inner.path(plain[0].text)):
            effects.writes.append(GitTree(cwd, plain[0].text))
            return None
        if sub == "checkout" and not dashdash and plain and _is_rev(cwd, plain[0].text):
            paths = plain[1:]
        for path in paths:
            for value in inner.values(path):
                _write(effects, inner, value, f"git {sub} of unknown paths")
        if sub == "checkout" and (options.get("-b") or options.get("-B")) and plain:
            effects.writes.append(GitTree(cwd, plain[-1].text))
    elif sub == "switch":
        target = plain[-1].text if plain else None
        if target:
            effects.writes.append(GitTree(cwd, target))
    elif sub == "reset" and _flag(options, "--hard", "--merge", "--keep"):
        effects.writes.append(GitTree(cwd, plain[0].text if plain else "HEAD"))
    elif sub in ("merge", "rebase", "pull") and plain:
        effects.writes.append(GitTree(cwd, plain[-1].text) if sub != "pull" else
                              Somewhere(cwd, None, "git pull (what it brings is not known yet)"))
    elif sub in ("cherry-pick", "revert") and plain:
        for rev in plain:
            effects.writes.append(GitTree(cwd, f"{rev.text}^" if sub == "revert" else rev.text,
                                          base=rev.text if sub == "revert" else f"{rev.text}^"))
    elif sub == "stash" and plain and plain[0].text in ("pop", "apply"):
        stash = plain[1].text if len(plain) > 1 else "stash@{0}"
        for path in _git_lines(cwd, "stash", "show", "--name-only", "--include-untracked", stash) or [UNKNOWN]:
            _write(effects, Shell(_git_top(cwd) or cwd), path, "git stash pop (its files are not known)")
    elif sub in ("apply", "am"):
        if _flag(options, "--stat", "--numstat", "--summary", "--check") and not _flag(options, "--apply"):
            return None
        patches = [p for p in plain if p.text != "-"]
        _patched(effects, inner, patches, stdin, strip=1)
    elif sub in ("rm", "mv"):
        for path in plain:
            for value in inner.values(path):
                _write(effects, inner, value, f"git {sub} of unknown paths")
    elif sub == "config" and _config_writes(args):
        where = _config_file(cwd, args, inner)
        if where is not None:
            effects.writes.append(where)
    elif sub == "clean" and (_flag(options, "-x", "-X")):
        effects.writes.append(Somewhere(cwd, None, "git clean -x (removes ignored files: the log and the "
                                                   "engine's state are ignored files)"))
    return None


GIT_REDIRECTS = {
    "replace": "git replace (every later read of that object, the engine's snapshot included, sees another one)",
    "read-tree": "git read-tree (the index, and with -u the files, from another tree)",
    "checkout-index": "git checkout-index (files written from the index)",
    "update-ref": "git update-ref (moves a ref the engine reads)",
    "symbolic-ref": "git symbolic-ref (moves HEAD)",
    "filter-branch": "git filter-branch (rewrites history and files)",
    "update-index": "git update-index (what the index says the files are)",
}


def _git_lists_only(sub, args):
    """`git replace -l`, `git symbolic-ref HEAD`: lookups that change nothing."""
    words = [a.text for a in args if isinstance(a, Token)]
    if sub == "replace":
        return not words or bool(set(words) & {"-l", "--list"})
    if sub == "symbolic-ref":
        plain = [w for w in words if not w.startswith("-")]
        return len(plain) < 2 and "-d" not in words and "--delete" not in words
    return False


CONFIG_READS = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool",
                "-l", "--list", "--show-origin", "--show-scope", "--name-only"}
CONFIG_WRITES = {"--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section",
                 "-e", "--edit"}
CONFIG_SUBCOMMANDS = {"set": True, "unset": True, "rename-section": True, "remove-section": True,
                      "edit": True, "get": False, "list": False}   # git 2.46+: `git config set ...`


def _config_writes(args):
    """`git config ...` that changes a config file (not a lookup)."""
    words = [a.text for a in args if isinstance(a, Token)]
    flags = [w for w in words if w.startswith("-")]
    plain = [w for w in words if not w.startswith("-")]
    if plain and plain[0] in CONFIG_SUBCOMMANDS:
        return CONFIG_SUBCOMMANDS[plain[0]]
    if any(f in CONFIG_WRITES for f in flags):
        return True
    if any(f in CONFIG_READS for f in flags):
        return False
    return len(plain) >= 2   # `git config KEY VALUE` sets; `git config KEY` reads


def _config_file(cwd, args, shell):
    """The file a writing `git config` changes: `--file`'s, or the repository's own (the one git
    runs programs from: core.fsmonitor, core.hooksPath, filters); None for --global/--system."""
    words = [a.text for a in args if isinstance(a, Token)]
    for i, word in enumerate(words):
        if word in ("--file", "-f") and i + 1 < len(words):
            return shell.path(os.path.expanduser(words[i + 1]))
        if word.startswith("--file="):
            return shell.path(os.path.expanduser(word.split("=", 1)[1]))
    if set(words) & {"--global", "--system", "--blob"}:
        return None
    lines = _git_lines(cwd, "rev-parse", "--absolute-git-dir")
    return os.path.join(lines[0], "config") if lines else Somewhere(cwd, None, "git config (no repository found)")


def _git_paths(args):
    out, seen = [], False
    for arg in args:
        if seen:
            out.append(arg)
        elif isinstance(arg, Token) and arg.text == "--":
            seen = True
    return out


def _git_lines(cwd, *argv):
    import subprocess   # imported here: most commands never ask git
    try:
        # as the engine's git (gitops.NEUTRAL): nothing the repository's config names is executed
        proc = subprocess.run(["git", "-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false", *argv],
                              cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return [line for line in proc.stdout.splitlines() if line.strip()]


def _git_top(cwd):
    lines = _git_lines(cwd, "rev-parse", "--show-toplevel")
    return lines[0] if lines else None


def _is_rev(cwd, text):
    if text.startswith("-"):
        return False
    return _git_lines(cwd, "rev-parse", "--verify", "--quiet", text + "^{commit}") is not None


def changed_by_git(tree, paths):
    """Which of `paths` (absolute) a GitTree would change; None when git cannot say."""
    top = _git_top(tree.cwd)
    if top is None:
        return None
    rel = [os.path.relpath(p, top) for p in paths if p.startswith(top + os.sep)]
    if not rel:
        return []
    argv = ["diff", "--name-only"] + ([tree.base, tree.rev] if tree.base else [tree.rev]) + ["--"] + rel
    lines = _git_lines(top, *argv)
    if lines is None:
        return None
    return [os.path.join(top, line) for line in lines]


PATCHED_PATH = re.compile(r"^(?:\+\+\+|---) (?:\"?)([^\t\n\"]+)|^diff --git (?:\"?)a/(\S+) (?:\"?)b/(\S+)"
                          r"|^rename (?:from|to) (\S+)|^Index: (\S+)", re.MULTILINE)


def _patched(effects, shell, patch_files, stdin, strip=1):
    texts = []
    for patch in patch_files:
        for value in shell.values(patch):
            texts.append(UNKNOWN if isinstance(value, Unknown) else _read_small(shell.path(value)))
    if not patch_files:
        texts.append(stdin if stdin is not None else UNKNOWN)
    for text in texts:
        if not known(text):
            effects.writes.append(Somewhere(shell.cwd, None, "a patch the hook cannot see (write it to a file "
                                                             "first, then apply the file)"))
            continue
        for match in PATCHED_PATH.finditer(text):
            for name in match.groups():
                if not name or name == "/dev/null":
                    continue
                parts = name.strip().split("/")
                for k in range(0, min(len(parts), 4)):   # any -pN: each way of stripping
                    _write(effects, shell, "/".join(parts[k:]), "")


def _patch(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, OPTIONS_WITH_VALUE["patch"] | {"-i", "--input", "-o", "--output"})
    inner = Shell(shell.cwd, shell.vars, shell.depth)
    for value in options.get("-d", []) + options.get("--directory", []):
        if value is not None:
            inner.cwd = inner.path(value.text)
    if _flag(options, "--dry-run"):
        return None
    for value_token in options.get("-o", []) + options.get("--output", []):
        if value_token is not None:
            _write(effects, inner, value_token.text, "")
    inputs = [v for v in options.get("-i", []) + options.get("--input", []) if v is not None]
    if operands:
        for value in inner.values(operands[0]):
            _write(effects, inner, value, "patch of an unknown file")
        if len(operands) > 1 and not inputs:
            inputs = operands[1:2]
    _patched(effects, inner, inputs, stdin)
    return None


def _tar(name, args, stdin, shell, effects, head):
    cluster = args[0].text if args and isinstance(args[0], Token) and not args[0].text.startswith("-") else ""
    extract = "x" in cluster or any(isinstance(a, Token) and (a.text in ("--extract", "--get") or
                                    (re.match(r"^-[a-zA-Z]+$", a.text) and "x" in a.text)) for a in args)
    create = "c" in cluster or "r" in cluster or "u" in cluster or any(
        isinstance(a, Token) and (a.text in ("--create", "--append", "--update") or
                                  (re.match(r"^-[a-zA-Z]+$", a.text) and ("c" in a.text or "r" in a.text)))
        for a in args)
    rest = args[1:] if cluster else args
    archive, folder, members, i = None, shell.cwd, [], 0
    if "f" in cluster:   # old style: `tar xzf FILE`, the f takes the next word
        archive = rest[0] if rest else None
        rest = rest[1:]
    while i < len(rest):
        arg = rest[i]
        text = arg.text if isinstance(arg, Token) else ""
        if text in ("-f", "--file") and i + 1 < len(rest):
            archive, i = rest[i + 1], i + 2
            continue
        if text.startswith("--file="):
            archive = Token(text[7:])
        elif text in ("-C", "--directory") and i + 1 < len(rest):
            folder, i = shell.path(rest[i + 1].text), i + 2
            continue
        elif text.startswith("--directory="):
            folder = shell.path(text.split("=", 1)[1])
        elif re.match(r"^-[a-zA-Z]*f$", text) and i + 1 < len(rest):
            archive, i = rest[i + 1], i + 2
            continue
        elif not text.startswith("-"):
            members.append(arg)
        i += 1
    if create and archive is not None:
        for value in shell.values(archive):
            if value != "-":
                _write(effects, shell, value, "tar into an unknown file")
        for member in members:
            for value in shell.values(member):
                if not isinstance(value, Unknown):
                    effects.recursive_reads.append(shell.path(value))
        return None
    if not extract:
        return None
    inner = Shell(folder, shell.vars, shell.depth)
    if members:
        for member in members:
            for value in inner.values(member):
                _write(effects, inner, value, "tar of unknown members")
        return None
    names = None
    values = shell.values(archive) if archive is not None else [UNKNOWN]
    if values and not isinstance(values[0], Unknown) and values[0] != "-":
        names = _archive_names(shell.path(values[0]), tarfile_kind=True)
    if names is None:
        effects.writes.append(Somewhere(folder, None, "tar extracting an archive the hook cannot list"))
        return None
    for member in names:
        _write(effects, inner, member, "")
    return None


def _archive_names(path, tarfile_kind):
    import tarfile
    import zipfile
    try:
        if tarfile_kind:
            with tarfile.open(path) as archive:
                return archive.getnames()[:100_000]
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()[:100_000]
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError):
        return None


def _unzip(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, OPTIONS_WITH_VALUE["unzip"])
    if _flag(options, "-l", "-t", "-v", "-p", "-Z", "-c"):
        return None
    folder = shell.cwd
    for value in options.get("-d", []):
        if value is not None:
            folder = shell.path(value.text)
    if not operands:
        return None
    inner = Shell(folder, shell.vars, shell.depth)
    if len(operands) > 1:
        for member in operands[1:]:
            _write(effects, inner, member.text if isinstance(member, Token) else UNKNOWN, "unzip members")
        return None
    values = shell.values(operands[0])
    names = None if isinstance(values[0], Unknown) else _archive_names(shell.path(values[0]), tarfile_kind=False)
    if names is None:
        effects.writes.append(Somewhere(folder, None, "unzip of an archive the hook cannot list"))
        return None
    for member in names:
        _write(effects, inner, member, "")
    return None


def _url_name(url):
    path = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    base = path.rsplit("/", 1)[-1] if "/" in path.split("://", 1)[-1] else ""
    return base or "index.html"


def _curl(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, OPTIONS_WITH_VALUE["curl"] | {"-o", "--output", "--output-dir", "-D",
                                                                     "--dump-header", "--trace", "-K", "--config"})
    folder = shell.cwd
    for value in options.get("--output-dir", []):
        if value is not None:
            folder = shell.path(value.text)
    inner = Shell(folder, shell.vars, shell.depth)
    for key in ("-o", "--output", "-D", "--dump-header", "--trace", "-c", "--cookie-jar"):
        for value_token in options.get(key, []):
            if value_token is not None:
                for value in inner.values(value_token):
                    _write(effects, inner, value, f"curl {key} to an unknown file")
    remote = _flag(options, "-O", "--remote-name", "--remote-name-all")
    if remote:
        for url in operands:
            if isinstance(url, Token):
                _write(effects, inner, _url_name(url.text), "")
    return None


def _wget(name, args, stdin, shell, effects, head):
    operands, options = _operands(args, OPTIONS_WITH_VALUE["wget"] | {"-O", "--output-document", "-P",
                                                                     "--directory-prefix", "-o", "--output-file",
                                                                     "-a", "--append-output"})
    folder = shell.cwd
    for value in options.get("-P", []) + options.get("--directory-prefix", []):
        if value is not None:
            folder = shell.path(value.text)
    inner = Shell(folder, shell.vars, shell.depth)
    named = False
    for key in ("-O", "--output-document", "-o", "--output-file", "-a", "--append-output"):
        for value_token in options.get(key, []):
            if value_token is not None:
                named = named or key in ("-O", "--output-document")
                for value in inner.values(value_token):
                    if value != "-":
                        _write(effects, inner, value, f"wget {key} to an unknown file")
    if not named:
        for url in operands:
            if isinstance(url, Token):
                _write(effects, inner, _url_name(url.text), "")
    return None


def _echo(name, args, stdin, shell, effects, head):
    """echo/printf/cat print what a later `| bash` or `| xargs` reads: keep it when known."""
    if name == "cat":
        texts = []
        for arg in args:
            for value in shell.values(arg):
                if isinstance(value, Unknown) or value.startswith("-"):
                    continue
                texts.append(_read_small(shell.path(value)))
        if not args:
            return stdin
        return "".join(texts) if all(known(t) for t in texts) else UNKNOWN
    values = []
    for arg in args:
        if isinstance(arg, Token) and arg.text in ("-n", "-e", "-E") and name == "echo":
            continue
        got = shell.values(arg)
        if any(isinstance(v, Unknown) for v in got):
            return UNKNOWN
        values += got
    text = " ".join(values)
    if name == "printf":
        text = text.replace("\\n", "\n")
    return text + "\n"


HANDLERS = {
    "cd": _cd, "pushd": _cd,
    **{n: _removers for n in REMOVERS},
    "cp": _copiers, "mv": _copiers, "install": _copiers, "ln": _copiers, "rsync": _rsync,
    "dd": _dd, "sed": _sed, "gsed": _sed, "perl": _perl, "awk": _awk, "gawk": _awk,
    "sort": _sort, "uniq": _uniq, "ruff": _formatter,
    "find": _find, "xargs": _xargs, "parallel": _xargs,
    **{n: _shell for n in SHELLS}, "source": _source, ".": _source, "eval": _eval,
    **{n: _interpreter for n in INTERPRETERS if n != "perl"},
    "make": _make, "gmake": _make, "git": _git, "patch": _patch,
    "tar": _tar, "bsdtar": _tar, "unzip": _unzip, "curl": _curl, "wget": _wget,
    "echo": _echo, "printf": _echo, "cat": _echo,
}
for _name_ in ("vi", "vim", "nvim", "ex", "emacs"):
    HANDLERS[_name_] = _editors_with_code


def somewhere_matches(somewhere, path):
    """Could `somewhere` be `path` (absolute, real)?"""
    base = os.path.realpath(somewhere.base)
    if path != base and not path.startswith(base.rstrip(os.sep) + os.sep):
        return False
    return somewhere.pattern is None or fnmatch.fnmatch(os.path.basename(path), somewhere.pattern)

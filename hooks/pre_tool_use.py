#!/usr/bin/env python3
"""PreToolUse hook: deny edits of the fixed harness and of the experiment log.

A research repo is a folder holding autoresearch.jsonl; its protected files are that log
and the fixed files named in the log's latest config header (e.g. prepare.py,
autoresearch.sh). The hook looks at where a write lands, not at the session's cwd, so an
absolute path into any research repo is caught too.

Edit, Write, MultiEdit and NotebookEdit name their file. For Bash we read the command's
words and catch the common ways to write or remove a file: redirections (`>`, `>>`, `&>`),
`tee`, `rm`, `mv`, `cp`/`install`/`ln` onto it, `sed -i`/`perl -i`, `truncate`, `dd of=`.
A determined script can still write a file some other way; the engine checks the fixed
files' sha256 before every run and refuses to run when they changed, so this hook is the
early, friendly refusal, not the only guard.
"""

import glob
import json
import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hooklib  # noqa: E402

FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
SEPARATORS = {";", "&&", "||", "|", "|&", "&", "(", ")", ";;", "{", "}"}
REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>"}
PREFIXES = {"sudo", "command", "env", "nohup", "time", "exec", "builtin", "nice"}
WRITERS = {"rm", "unlink", "shred", "truncate", "tee", "mv"}  # every operand is written or removed
COPIERS = {"cp", "install", "ln", "rsync"}
IN_PLACE = {"sed", "gsed", "perl"}


# --- which files are protected -------------------------------------------------------------

def last_config(log_path):
    """The latest config header of the log, read from the end (the log can be long)."""
    try:
        with open(log_path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return None
    for line in reversed(lines):
        if b'"config"' not in line:
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(record, dict) and record.get("type") == "config":
            return record
    return None


def fixed_names(config):
    """Fixed file paths from a config header: a list of paths, of {path: sha}, or a {path: sha} map."""
    for key in ("fixed", "fixed_files", "fixedFiles"):
        value = config.get(key)
        if isinstance(value, dict):
            return [k for k in value if isinstance(k, str)]
        if isinstance(value, list):
            names = []
            for item in value:
                if isinstance(item, str):
                    names.append(item)
                elif isinstance(item, dict) and isinstance(item.get("path"), str):
                    names.append(item["path"])
            return names
    return []


class Protection:
    """Protected files per research repo, looked up once per repo."""

    def __init__(self):
        self._cache = {}

    def protected(self, repo):
        if repo not in self._cache:
            files = {os.path.realpath(repo / hooklib.LOG_NAME): hooklib.LOG_NAME}
            config = last_config(repo / hooklib.LOG_NAME)
            for name in fixed_names(config or {}):
                files[os.path.realpath(repo / name)] = name
            self._cache[repo] = files
        return self._cache[repo]

    def check(self, path):
        """(repo, name) when writing `path` would touch a protected file, else None."""
        real = os.path.realpath(path)
        repo = hooklib.find_repo(os.path.dirname(real))
        if repo is not None:
            name = self.protected(repo).get(real)
            if name:
                return repo, name
        # A folder that holds a research repo (rm -r ., mv repo elsewhere).
        if os.path.isdir(real):
            inner = hooklib.find_repo(real)
            if inner is not None and Path(real) in (inner, *inner.parents):
                return inner, hooklib.LOG_NAME
        return None


# --- what a Bash command writes ------------------------------------------------------------

def split_words(command):
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def segments(words):
    current = []
    for word in words:
        if word in SEPARATORS:
            if current:
                yield current
            current = []
        else:
            current.append(word)
    if current:
        yield current


def split_redirections(segment):
    """(redirection targets, the remaining words) of a simple command."""
    targets, words = [], []
    i = 0
    while i < len(segment):
        word = segment[i]
        if word.isdigit() and i + 1 < len(segment) and segment[i + 1] in REDIRECTS:
            i += 1  # `2> file`: the fd number belongs to the redirection
            word = segment[i]
        if word in REDIRECTS:
            if i + 1 < len(segment):
                targets.append(segment[i + 1])
            i += 2
            continue
        words.append(word)
        i += 1
    return targets, words


def strip_prefixes(words):
    """Drop `VAR=value` assignments and wrappers such as sudo, env, nohup."""
    while words and (("=" in words[0] and not words[0].startswith("-"))
                     or os.path.basename(words[0]) in PREFIXES):
        words = words[1:]
    return words


def edits_in_place(args):
    return any(a.startswith("--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a)
               for a in args)


def targets_of(segment, cwd):
    """The paths a simple command writes or removes, and the folder it changes to (cd)."""
    targets, words = split_redirections(segment)
    words = strip_prefixes(words)
    if not words:
        return targets, None
    name, rest = os.path.basename(words[0]), words[1:]
    if name == "cd":
        return targets, (rest[0] if rest else os.path.expanduser("~"))
    operands = [a for a in rest if not a.startswith("-")]
    if name in WRITERS:
        targets += operands
    elif name in COPIERS and len(operands) >= 2:
        targets += copy_destinations(operands, cwd)
    elif name in IN_PLACE and edits_in_place(rest):
        targets += operands
    elif name == "dd":
        targets += [a[3:] for a in rest if a.startswith("of=")]
    return targets, None


def copy_destinations(operands, cwd):
    """cp/install/ln SRC... DEST writes DEST, or DEST/basename(SRC) when DEST is a folder."""
    dest = operands[-1]
    if dest.endswith("/") or os.path.isdir(os.path.join(cwd, os.path.expanduser(dest))):
        return [os.path.join(dest, os.path.basename(src.rstrip("/"))) for src in operands[:-1]]
    return [dest]


def bash_targets(command, cwd):
    """Absolute paths a command writes or removes (globs expanded against the disk)."""
    paths = []
    for segment in segments(split_words(command)):
        targets, new_dir = targets_of(segment, cwd)
        for target in targets:
            full = os.path.join(cwd, os.path.expanduser(target))
            matches = glob.glob(full) if glob.has_magic(full) else []
            paths += matches or [full]
        if new_dir is not None:
            cwd = os.path.join(cwd, os.path.expanduser(new_dir))
    return paths


# --- the hook ---------------------------------------------------------------------------------

def reason_for(repo, name):
    if name == hooklib.LOG_NAME:
        return (f"autoresearch: {hooklib.LOG_NAME} in {repo} is the append-only experiment log; only the engine "
                "writes it (`autoresearch run`). Read it, or use `autoresearch status`, but do not change it.")
    return (f"autoresearch: {name} is a fixed file of the research repo {repo} (the evaluation harness; its sha256 "
            "is in the log header and the engine refuses to run when it changes). Edit only the files in scope, "
            "such as train.py. To change the harness on purpose, a person edits it and starts a new segment "
            "with `autoresearch init`.")


def deny(reason):
    hooklib.answer({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": reason}})


def handle(data):
    tool = hooklib.text_field(data, "tool_name")
    tool_input = data.get("tool_input")
    if tool is None or not isinstance(tool_input, dict):
        raise hooklib.LetThrough("PreToolUse input without tool_name/tool_input; letting this through")
    cwd = hooklib.text_field(data, "cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    if tool in FILE_TOOLS:
        path = tool_input.get(FILE_TOOLS[tool])
        if not isinstance(path, str) or not path:
            return
        paths = [os.path.join(cwd, os.path.expanduser(path))]
    elif tool == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return
        try:
            paths = bash_targets(command, cwd)
        except ValueError as exc:  # unbalanced quotes: bash itself will refuse to run it
            raise hooklib.LetThrough(f"could not parse the Bash command ({exc}); letting it through")
    else:
        return
    protection = Protection()
    for path in paths:
        hit = protection.check(path)
        if hit:
            deny(reason_for(*hit))
            return


if __name__ == "__main__":
    sys.exit(hooklib.main(handle))

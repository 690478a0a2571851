#!/usr/bin/env python3
"""PreToolUse hook: deny edits of the fixed harness, the experiment log and the engine's state,
and reads of the hidden holdout.

A research repo is a folder holding autoresearch.jsonl; protected.py says what in it is
protected. The hook looks at where a write lands, not at the session's cwd, so an absolute
path into any research repo is caught too.

- Edit, Write, MultiEdit, NotebookEdit name their file; Read, Grep and NotebookRead too (only
  the holdout is refused there: reading a fixed file is fine).
- MCP tools (`mcp__server__tool`): the paths in their input, as writes when the tool's name
  says it changes files (write, edit, move, delete...), else as reads.
- Bash: shell_effects.py works out what the command writes and reads (redirections, cp -t,
  bash -c, eval, $(...), variables, xargs, find -exec, make, git checkout/restore/stash/apply,
  patch, tar, curl -o, inline python...).

This hook is a courtesy, an early and friendly refusal: a program can always write a file in a
way no reading of its words can see. The engine is the guard: it records the fixed files, the
log and its own state before each experiment and verifies them after (references/hooks.md).
"""

import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hooklib  # noqa: E402
import protected  # noqa: E402
import shell_effects  # noqa: E402

FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
READ_TOOLS = {"Read": "file_path", "NotebookRead": "notebook_path", "Grep": "path"}
MCP_WRITES = re.compile(r"write|edit|create|move|rename|delete|remove|patch|replace|insert|append|save|put|"
                        r"upload|copy|mkdir|update|apply|set|truncate|overwrite|modify|change", re.IGNORECASE)
PATH_KEYS = re.compile(r"path|file|source|destination|dest|target|dir|folder|src|dst|to|from|uri|name",
                       re.IGNORECASE)


def reason_for(repo, name, how=""):
    how = f" ({how})" if how else ""
    if name == hooklib.LOG_NAME:
        return (f"autoresearch: {hooklib.LOG_NAME} in {repo} is the append-only experiment log; only the engine "
                f"writes it (`autoresearch run`){how}. Read it, or use `autoresearch status`, but do not change it.")
    if name.endswith("/") or "/" in name and name.split("/")[0] in (hooklib.STATE_DIR, ".git"):
        return (f"autoresearch: {name} in {repo} is the engine's own state (the run in progress, the session, the "
                f"run folders, the log's chain){how}; only the engine writes it. Use `autoresearch status`, "
                "`stop` or `resume` instead.")
    return (f"autoresearch: {name} is a fixed file of the research repo {repo} (the evaluation harness; its sha256 "
            f"is in the log header and the engine refuses to run when it changes){how}. Edit only the files in "
            "scope, such as train.py. To change the harness on purpose, a person edits it and starts a new "
            "segment with `autoresearch init`.")


def hidden_reason(what):
    if "key" in what:
        return f"autoresearch: {what} is a secret of the engine; nothing else reads it."
    return (f"autoresearch: {what} is the hidden holdout; its value must never reach the agent (the person "
            "reviewing the night compares it with the validation results). Work from the validation metric "
            "that `autoresearch run` prints.")


def deny(reason):
    hooklib.answer({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": reason}})


# --- the decision --------------------------------------------------------------------------

def decision(data):
    """The reason to deny this tool call, or None to let it through."""
    tool = hooklib.text_field(data, "tool_name")
    tool_input = data.get("tool_input")
    if tool is None or not isinstance(tool_input, dict):
        raise hooklib.LetThrough("PreToolUse input without tool_name/tool_input; letting this through")
    cwd = hooklib.text_field(data, "cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    protection = protected.Protection()
    if tool in FILE_TOOLS:
        return _writes(protection, _paths(cwd, [tool_input.get(FILE_TOOLS[tool])]))
    if tool in READ_TOOLS:
        return _reads(_paths(cwd, [tool_input.get(READ_TOOLS[tool])]), recursive=tool == "Grep")
    if tool.startswith("mcp__"):
        paths = _paths(cwd, _input_paths(tool_input))
        if MCP_WRITES.search(tool.split("__")[-1]):
            return _writes(protection, paths) or _reads(paths, recursive=False)
        return _reads(paths, recursive=True)
    if tool == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return None
        return bash_decision(protection, command, cwd)
    return None


def _paths(cwd, values):
    return [os.path.join(cwd, os.path.expanduser(v)) for v in values if isinstance(v, str) and v]


def _input_paths(value, key="", depth=0):
    """String values of an MCP tool's input that name files (by their key, or by looking like a path)."""
    if depth > 4:
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _input_paths(v, str(k), depth + 1)]
    if isinstance(value, list):
        return [p for v in value for p in _input_paths(v, key, depth + 1)]
    if isinstance(value, str) and value and "\n" not in value and len(value) < 4096 and (
            PATH_KEYS.search(key) or "/" in value):
        return [value]
    return []


def _writes(protection, paths):
    for path in paths:
        hit = protection.check(path)
        if hit:
            return reason_for(*hit)
    return None


def _reads(paths, recursive):
    for path in paths:
        what = protected.hidden(path) or (protected.hidden_inside(path) if recursive and os.path.isdir(path)
                                          else None)
        if what:
            return hidden_reason(what)
    return None


def bash_decision(protection, command, cwd):
    try:
        effects = shell_effects.analyse(command, cwd)
    except ValueError as exc:  # unbalanced quotes: bash itself will refuse to run it
        raise hooklib.LetThrough(f"could not parse the Bash command ({exc}); letting it through")
    for write in effects.writes:
        hit, how = _write_hit(protection, write)
        if hit:
            return reason_for(*hit, how=how)
    for code in effects.code:
        hit = protection.code_writes(code)
        if hit:
            return reason_for(*hit, how=f"an inline {code.language} program that names it and writes files")
        if protected.HIDDEN_WORD.search(code.text):
            return hidden_reason("an inline program naming the holdout")
    reason = _reads(effects.reads, recursive=False) or _reads(effects.recursive_reads, recursive=True)
    if reason:
        return reason
    if protected.HOLDOUT_COMMAND.search(command):
        return hidden_reason("the output of `autoresearch verify` (or `report --holdout`)")
    if protected.HIDDEN_WORD.search(command):
        for word in re.findall(r"[^\s'\"<>|;&()=]*holdout[^\s'\"<>|;&()]*", command, re.IGNORECASE):
            full = os.path.join(cwd, os.path.expanduser(word))
            what = protected.hidden(full)
            if what:
                return hidden_reason(what)
    return None


def _write_hit(protection, write):
    if isinstance(write, str):
        return protection.check(write), ""
    if isinstance(write, shell_effects.Somewhere):
        hit = protection.check_somewhere(write, shell_effects.somewhere_matches)
        return hit, (f"the command writes files the hook cannot name: {write.why}; name the files "
                     "explicitly" if hit else "")
    if isinstance(write, shell_effects.GitTree):
        repo, files = protection.files_of(write.cwd)
        if files is None:
            return None, ""
        changed = shell_effects.changed_by_git(write, list(files.files))
        for path in changed or []:
            name = files.files.get(os.path.realpath(path))
            if name:
                return (repo, name), f"`{write.rev}` has a different {name}, and this git command would check it out"
    return None, ""


def handle(data):
    reason = decision(data)
    if reason:
        deny(reason)


if __name__ == "__main__":
    sys.exit(hooklib.main(handle))

"""Which files the agent may not change, and which it may not read.

Not to be written (per research repo, the folder holding autoresearch.jsonl):
- the log itself and the fixed files named in its latest config header (prepare.py, the
  benchmark script...);
- the engine's state: everything under `.autoresearch/` (current.json, session.json, the run
  folders) and under the git directory's `autoresearch/` (the log's hash-chain tip and copy);
- where git reads what it executes: the git directory's `config`, `info/attributes` and
  `hooks/` (a hook or an fsmonitor or filter program planted there would run at the next git
  command; the engine's own git runs none of them and restores them after each benchmark).

Not to be read (HIDDEN_*: the holdout split, whose value the agent must never see):
- the holdout split of the prepared data: prepare.py writes each split as <split>.bin and
  <split>.idx.npy in its data folder ($AUTORESEARCH_CACHE, else ~/.cache/autoresearch, then
  prepared/), so holdout.* there;
- the holdout value the harness writes into each run's folder (.autoresearch/runs/N/holdout*),
  and the report page that shows it (.autoresearch/holdout-report.html);
- the engine commands that print it: `autoresearch verify`, `autoresearch report --holdout`.
Reading a fixed file is fine: only the holdout is hidden.
"""

import fnmatch
import json
import os
import re
from pathlib import Path

import hooklib

# Relative to the data folder (AUTORESEARCH_CACHE or ~/.cache/autoresearch).
HIDDEN_DATA = ("*/holdout*",)
# Relative to the research repo.
HIDDEN_IN_REPO = (".autoresearch/runs/*/holdout*", ".autoresearch/holdout*")
# Engine commands that print the holdout (for the person, in a terminal): refused to the agent.
HOLDOUT_COMMAND = re.compile(r"\bautoresearch\s+(?:-\S+\s+)*(?:verify\b|report\b[^|;&\n]*\s--holdout\b)")
# Secrets of the engine, relative to the research repo: the key that signs the log cache.
SECRET_IN_REPO = (".git/autoresearch/cache.key",)
# Inline code that names this reads the holdout, whatever path it builds.
HIDDEN_WORD = re.compile(r"holdout", re.IGNORECASE)

STATE_DIRS = (hooklib.STATE_DIR,)
GIT_STATE = "autoresearch"          # <git dir>/autoresearch: the chain's tip and the log's copy
GIT_EXECUTES_FILES = ("config", os.path.join("info", "attributes"))   # <git dir>/...: what git runs
GIT_EXECUTES_DIRS = ("hooks",)
# Names under .autoresearch/ that a name pattern (find -name '*.json' -delete) could hit.
STATE_NAMES = ("current.json", "session.json", "stop-hook.json", "lock", "runs", "report.html", "output.log",
               "steps.jsonl", "summary.json", "diagnosis.json", "diff.patch", "sample.txt", "checks.log")
WRITE_HINT = re.compile(r"\b(write|writelines|write_text|write_bytes|unlink|remove|rmtree|rename|replace|"
                        r"truncate|copy|copy2|copyfile|copyfileobj|move|symlink|link|chmod|system|popen|"
                        r"subprocess|spawn|exec|execSync|writeFile|writeFileSync|appendFile|rmSync|unlinkSync|"
                        r"open\s*\([^)]*['\"][^'\"]*[wax+][^'\"]*['\"]|dump|save|savetxt|tofile|print\s*\{|"
                        r"File\.write|IO\.write|FileUtils|>)\b|['\"][wax]b?\+?['\"]|['\"]r\+['\"]|>\s*\$|>>?\s*['\"]|"
                        r"open\s*\(\s*[A-Z_]+\s*,\s*['\"]?[>+]")


QUOTED = re.compile(r"""(?:'([^'\n]{1,4096})'|"([^"\n]{1,4096})")""")


def data_folder():
    return os.environ.get("AUTORESEARCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "autoresearch")


def last_config(log_path):
    """The latest config header of the log, read from the end (the log can be long)."""
    try:
        with open(log_path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            block = 1 << 16
            data = b""
            while True:
                start = max(0, size - block)
                f.seek(start)
                data = f.read(size - start)
                lines = data.split(b"\n")
                config = _config_in(lines if start == 0 else lines[1:])
                if config is not None or start == 0:
                    return config
                block *= 8
    except OSError:
        return None


def _config_in(lines):
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


def git_dir(root):
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
    return os.path.normpath(os.path.join(root, path))


class RepoFiles:
    """The protected files and folders of one research repo (real paths)."""

    def __init__(self, repo):
        self.repo = str(repo)
        self.files = {os.path.realpath(os.path.join(self.repo, hooklib.LOG_NAME)): hooklib.LOG_NAME}
        for name in fixed_names(last_config(os.path.join(self.repo, hooklib.LOG_NAME)) or {}):
            self.files[os.path.realpath(os.path.join(self.repo, name))] = name
        self.dirs = {os.path.realpath(os.path.join(self.repo, d)): d + "/" for d in STATE_DIRS}
        gd = git_dir(self.repo)
        if gd:
            rel = os.path.relpath(gd, self.repo)
            for name in (GIT_STATE,) + GIT_EXECUTES_DIRS:
                self.dirs[os.path.realpath(os.path.join(gd, name))] = os.path.join(rel, name) + "/"
            for name in GIT_EXECUTES_FILES:
                self.files[os.path.realpath(os.path.join(gd, name))] = os.path.join(rel, name)

    def hit(self, real):
        """The protected name that writing or removing `real` touches, or None."""
        if real in self.files:
            return self.files[real]
        for folder, name in self.dirs.items():
            if real == folder or real.startswith(folder + os.sep):
                return name + os.path.relpath(real, folder) if real != folder else name
        if os.path.isdir(real):   # rm -r, mv, a formatter on a folder holding protected files
            inside = real.rstrip(os.sep) + os.sep
            for path, name in list(self.files.items()) + list(self.dirs.items()):
                if path.startswith(inside):
                    return name
        return None

    def hit_somewhere(self, somewhere, matches):
        for path, name in self.files.items():
            if matches(somewhere, path):
                return name
        for folder, name in self.dirs.items():
            base = os.path.realpath(somewhere.base)
            if not (folder == base or folder.startswith(base.rstrip(os.sep) + os.sep)
                    or base.startswith(folder + os.sep)):
                continue
            if somewhere.pattern is None:
                return name
            try:
                names = os.listdir(folder)
            except OSError:
                names = []
            if any(fnmatch.fnmatch(n, somewhere.pattern) for n in list(names) + list(STATE_NAMES)):
                return name
        return None


class Protection:
    """Protected files per research repo, looked up once per repo."""

    def __init__(self):
        self._repos = {}

    def repo_files(self, repo):
        if repo not in self._repos:
            self._repos[repo] = RepoFiles(repo)
        return self._repos[repo]

    def _repos_around(self, path):
        """Research repos that `path` is in, or (for a folder) that is the repo itself."""
        found = []
        for start in (os.path.dirname(path), path):
            repo = hooklib.find_repo(start) if start else None
            if repo is not None and str(repo) not in found:
                found.append(str(repo))
        return found

    def check(self, path):
        """(repo, name) when writing `path` would touch a protected file, else None."""
        real = os.path.realpath(path)
        for repo in self._repos_around(real):
            name = self.repo_files(repo).hit(real)
            if name:
                return repo, name
        return None

    def check_somewhere(self, somewhere, matches):
        real = os.path.realpath(somewhere.base)
        for repo in self._repos_around(real):
            name = self.repo_files(repo).hit_somewhere(somewhere, matches)
            if name:
                return repo, name
        return None

    def files_of(self, cwd):
        repo = hooklib.find_repo(cwd)
        return (str(repo), self.repo_files(str(repo))) if repo is not None else (None, None)

    def code_writes(self, code):
        """(repo, name) when inline code names a protected file and looks like it writes."""
        if not WRITE_HINT.search(code.text):
            return None
        # shutil.copy('prepare.py', dest) reads the file it names first
        text = re.sub(r"copy\w*\s*\(\s*(['\"])[^'\"]*\1\s*,", "copy(", code.text)
        for value in [a or b for a, b in QUOTED.findall(text)]:
            hit = self.check(os.path.join(code.cwd, os.path.expanduser(value)))
            if hit:
                return hit
        repo, files = self.files_of(code.cwd)
        if files is None:
            return None
        for name in list(files.files.values()) + [d.rstrip("/") for d in files.dirs.values()]:
            if name and re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", text):
                return repo, name
        return None


def hidden(path):
    """What `path` hides (a description), when it is a holdout file the agent may not read."""
    real = os.path.realpath(path)
    data = os.path.realpath(data_folder())
    if real.startswith(data + os.sep):
        rel = os.path.relpath(real, data)
        if any(fnmatch.fnmatch(rel, pattern) for pattern in HIDDEN_DATA):
            return f"the holdout split of the prepared data ({real})"
    repo = hooklib.find_repo(os.path.dirname(real))
    if repo is not None:
        rel = os.path.relpath(real, os.path.realpath(repo))
        if any(fnmatch.fnmatch(rel, pattern) for pattern in HIDDEN_IN_REPO):
            return f"the holdout result of a run ({rel})"
        if any(fnmatch.fnmatch(rel, pattern) for pattern in SECRET_IN_REPO):
            return f"the engine's key for its log cache ({rel})"
    return None


def hidden_inside(folder):
    """What a recursive read of `folder` would reveal (grep -r, tar c, cp -r), or None."""
    real = os.path.realpath(folder)
    inside = real.rstrip(os.sep) + os.sep
    data = os.path.realpath(data_folder())
    if data == real or data.startswith(inside) or real.startswith(data + os.sep):
        for pattern in HIDDEN_DATA:
            for path in Path(data).glob(pattern):
                if str(path) == real or str(path).startswith(inside):
                    return f"the holdout split of the prepared data ({path})"
    repo = hooklib.find_repo(real)
    candidates = [repo] if repo is not None else []
    try:
        candidates += [Path(real) / entry for entry in os.listdir(real)
                       if (Path(real) / entry / hooklib.LOG_NAME).is_file()]
    except OSError:
        pass
    for repo in candidates:
        runs = Path(repo) / hooklib.STATE_DIR / "runs"
        if not (str(runs) == real or str(runs).startswith(inside) or real.startswith(str(runs) + os.sep)):
            continue
        latest = _latest_run(runs)
        if latest is not None and any(latest.glob("holdout*")):
            return f"holdout results in {runs}"
    return None


def _latest_run(runs):
    try:
        numbers = [int(n) for n in os.listdir(runs) if n.isdigit()]
    except OSError:
        return None
    return runs / str(max(numbers)) if numbers else None

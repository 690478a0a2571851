"""The forms a pasted training log arrives in, as rewrites of a plain log, and a generality check.

Users paste a crash the way their tool showed it: a Jupyter/IPython traceback (`Cell In[3], line 5`,
`----> 5 ...`, `File ~/x.py:12, in f(...)`), an old IPython or Colab one (`/x.py in f(args)` with the line
on a `--> 12` arrow), VS Code's `Exception has occurred: X` block, a rich box (`│ /x.py:12 in f │`,
`│ ❱ 12 │ ...`), Windows paths, the error line alone, quoted inside a sentence, surrounded by text in
another language, or followed by a shutdown tail (wandb's summary, NCCL's teardown warnings, an
`Exception ignored in` traceback of a destructor). Each rewrite keeps what the run said (the exception
chain, its messages and frames) and changes only how it is shown, so a diagnosis that changes under it
is one the log reader lost.

    PYTHONPATH=src python3 tests/diagnosis/paste_forms.py [--show FORM]

rewraps every non-blind corpus log the diagnoser gets right and counts, per form, the diagnoses whose
family changes (the acceptance batches are never loaded).
"""

import re
import sys

BLIND = ("batch9", "batch15", "batch16", "batch17", "batch18")

_TB = re.compile(r"^Traceback \(most recent call last\):[ \t]*$", re.M)
_FRAME = re.compile(r'^[ \t]+File "([^"\n]+)", line (\d+), in (\S+)[ \t]*$')
_EXC = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|Exception)(?::[ \t]*(.*))?$")


def _blocks(text):
    """[(start line, end line, frames [(path, line, func, source)], type, message)] of the plain
    CPython tracebacks in `text` (a header at column 0, frames, then the exception line)."""
    lines = text.split("\n")
    out = []
    index = 0
    while index < len(lines):
        if not _TB.match(lines[index]):
            index += 1
            continue
        start, frames, cursor = index, [], index + 1
        while cursor < len(lines):
            frame = _FRAME.match(lines[cursor])
            if frame:
                source = ""
                if cursor + 1 < len(lines) and lines[cursor + 1].startswith("    ") and not _FRAME.match(lines[cursor + 1]):
                    source = lines[cursor + 1].strip()
                    cursor += 1
                frames.append((frame.group(1), int(frame.group(2)), frame.group(3), source))
                cursor += 1
                while cursor < len(lines) and lines[cursor].startswith("    ") and not _FRAME.match(lines[cursor]):
                    cursor += 1   # carets and wrapped source
                continue
            break
        exc = _EXC.match(lines[cursor]) if cursor < len(lines) else None
        if frames and exc:
            out.append((start, cursor, frames, exc.group(1), exc.group(2) or ""))
            index = cursor + 1
        else:
            index = cursor
    return out


def _rewrite_blocks(text, render):
    lines = text.split("\n")
    blocks = _blocks(text)
    if not blocks:
        return None
    for start, end, frames, kind, message in reversed(blocks):
        lines[start:end + 1] = render(frames, kind, message).split("\n")
    return "\n".join(lines)


_LIBRARY = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python[\d.]*[/\\]|^<")


def _args(func):
    return "(...)" if func != "<module>" else ""


def jupyter(text):
    """IPython 8 / Jupyter: a dashed rule, `Type   Traceback (most recent call last)`, `Cell In[n], line N`
    for the cell, `File path:N, in f(...)` and numbered source with a `---->` arrow."""
    def render(frames, kind, message):
        out = ["-" * 75, f"{kind:<42}Traceback (most recent call last)"]
        for position, (path, line, func, source) in enumerate(frames):
            cell = position == 0 and not _LIBRARY.search(path)   # the cell the user ran: their own code
            head = f"Cell In[7], line {line}" if cell else f"File {path}:{line}, in {func}{_args(func)}"
            out += [head, f"{line - 1:>6} ", f"---> {line} {source}".rstrip(), ""]
        out.append(f"{kind}: {message}".rstrip(": ") if message else kind)
        return "\n".join(out)
    return _rewrite_blocks(text, render)


def old_ipython(text):
    """IPython 7 and Colab: `<ipython-input-..> in <module>`, `path in f(args)` and the line on a `-->` arrow."""
    def render(frames, kind, message):
        out = ["-" * 75, f"{kind:<42}Traceback (most recent call last)"]
        for position, (path, line, func, source) in enumerate(frames):
            cell = position == 0 and not _LIBRARY.search(path)
            head = "<ipython-input-7-3fd68efc0078> in <module>" if cell else f"{path} in {func}(self, *args)"
            out += [head, f"{line - 1:>6} ", f"--> {line:>4} {source}".rstrip(), ""]
        out.append(f"{kind}: {message}".rstrip(": ") if message else kind)
        return "\n".join(out)
    return _rewrite_blocks(text, render)


def vscode(text):
    """VS Code's exception widget: `Exception has occurred: Type`, the message on the next line, the
    frames of the user's own code only (justMyCode), and (newer versions) the exception line again."""
    def render(frames, kind, message):
        out = [f"Exception has occurred: {kind.rsplit('.', 1)[-1]}", message]
        for path, line, func, source in frames:
            if not _LIBRARY.search(path):
                out += [f'  File "{path}", line {line}, in {func}', f"    {source}"]
        out.append(f"{kind}: {message}".rstrip(": ") if message else kind)
        return "\n".join(out)
    return _rewrite_blocks(text, render)


def rich(text):
    """rich's boxed traceback (accelerate, typer, kohya): `│ path:N in func │` and `│ ❱ N │ source │`."""
    def render(frames, kind, message):
        width = 98
        out = ["╭" + " Traceback (most recent call last) ".center(width, "─") + "╮"]
        for path, line, func, source in frames:
            for body in (f"{path}:{line} in {func}", "", f"  {line - 1:>4} │", f"❱ {line:>4} │ {source}", ""):
                out.append("│ " + body.ljust(width - 2)[:max(width - 2, len(body))] + " │")
        out.append("╰" + "─" * width + "╯")
        out.append(f"{kind}: {message}".rstrip(": ") if message else kind)
        return "\n".join(out)
    return _rewrite_blocks(text, render)


_POSIX_PATH = re.compile(r'(?<=File ")/[^"\n]+')


def windows(text):
    """The same traceback on Windows: `C:\\Users\\me\\...\\Lib\\site-packages\\...` with backslashes."""
    if not _TB.search(text):
        return None

    def convert(match):
        path = match.group(0)
        path = re.sub(r"^/(?:usr|opt|home/\w+|root)(?:/[\w.-]+)*?/lib/python[\d.]+/", r"C:/Users/me/anaconda3/envs/train/Lib/", path)
        path = re.sub(r"^/(?:home/[\w.-]+|root|workspace|content)/", "C:/Users/me/", path)
        return path.replace("/", "\\")
    return _POSIX_PATH.sub(convert, text)


def _last_exception_line(text):
    blocks = _blocks(text)
    if not blocks:
        return None
    first = blocks[-1]
    return f"{first[3]}: {first[4]}".rstrip(": ") if first[4] else first[3]


def one_line(text):
    """Only the exception line, as users paste it into an issue title or a chat."""
    return _last_exception_line(text)


def in_sentence(text):
    """The exception line quoted inside a sentence of the user's own words."""
    line = _last_exception_line(text)
    return f"When I run train.py I get `{line}` after a few seconds, any idea what is wrong?" if line else None


def foreign(text):
    """The log with the user's words around it in another language."""
    return "运行 train.py 训练时报错如下：\n" + text + "\n请问这是什么原因？怎么解决？"


_TAIL = """wandb: Waiting for W&B process to finish... (failed 1). Press Control-C to abort syncing.
wandb: 🚀 View run glorious-sun-12 at: https://wandb.ai/me/proj/runs/3x9q2m1k
wandb: Synced 5 W&B file(s), 0 media file(s), 0 artifact file(s) and 0 other file(s)
wandb: Find logs at: ./wandb/run-20240510_101010-3x9q2m1k/logs
[rank0]:[W510 10:10:10.123456789 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 (function operator())
Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3a2c1e5d30>
Traceback (most recent call last):
  File "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__
    self._shutdown_workers()
  File "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1443, in _shutdown_workers
    if self._persistent_workers or self._workers_status[worker_id]:
AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute '_workers_status'"""


def shutdown_tail(text):
    """The error in the middle, then what the process printed while it shut down."""
    return text.rstrip("\n") + "\n" + _TAIL + "\n"


def markdown(text):
    """A fenced code block under a `> ` quote in an issue, as GitHub's quote-reply makes it."""
    return "I got this error:\n\n" + "\n".join("> " + line for line in ("```python\n" + text.rstrip("\n") + "\n```").split("\n"))


FORMS = {"jupyter": jupyter, "old_ipython": old_ipython, "vscode": vscode, "rich": rich, "windows": windows,
         "one_line": one_line, "in_sentence": in_sentence, "foreign": foreign, "shutdown_tail": shutdown_tail,
         "markdown": markdown}


def check(show=None):
    """{form: (rewrapped, changed, [ids])} over the non-blind corpus logs the diagnoser gets right."""
    from gpu_train_debug import corpus
    from gpu_train_debug.diagnose import diagnose
    config = corpus.template_config()
    cases = [c for c in corpus.load() if c.split not in BLIND]
    result = {name: [0, 0, []] for name in FORMS}
    for case in cases:
        profile = dict({"status": "crash"}, **case.profile)
        base = diagnose(case.text, dict(config), profile)["family"]
        if base != case.family:
            continue
        for name, form in FORMS.items():
            text = form(case.text)
            if text is None:
                continue
            result[name][0] += 1
            got = diagnose(text, dict(config), profile)["family"]
            if got != base:
                result[name][1] += 1
                result[name][2].append(f"{case.id} ({case.split}): {base} -> {got}")
    return result


def main(argv):
    show = argv[argv.index("--show") + 1] if "--show" in argv else None
    total = 0
    for name, (count, changed, ids) in check(show).items():
        total += changed
        print(f"{name:<14} rewrapped {count:>4}  changed {changed:>3}")
        if show in (name, "all"):
            for line in ids:
                print("   ", line)
    print(f"{'all':<14} changed {total}")


if __name__ == "__main__":
    main(sys.argv[1:])

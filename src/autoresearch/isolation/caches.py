"""The caches a benchmark may write, outside its own folders: what the template declares.

A sandboxed benchmark writes its snapshot, its run folder and a private temporary folder, and
nothing else of the user's. Some tools it runs keep caches in the home folder that must outlive
a run (compiled GPU kernels: minutes to rebuild). The segment's config lists them (`caches`,
set by `init`: the template's list, plus `init --cache PATH`); a log written before the field
existed gets its template's list. Each entry is a path as the person would write it: `~` and
`$VAR` are expanded when the run starts (an entry whose variable is unset is left out), and the
folder is made if missing, so the sandbox can grant it.

A cache is a channel from one run to the next, so an entry that would open what decides is
refused: the home folder itself, a folder holding the research repo, the engine's source or the
user's site folder, and any relative path.

To add a template's cache (the ML template's compile cache, say), add its path to the list in
TEMPLATES; a research repo gets it at its next `init`, and at once when its config predates
the field.
"""

import os
import re
import site
from dataclasses import dataclass

# The ML template's tools: triton's kernels, CUDA's JIT cache, torch's and Hugging Face's
# downloads (the kernel hub's Flash Attention 3), as harness.py makes them before its seal.
ML = ["~/.triton", "~/.nv", "~/.cache/torch", "~/.cache/huggingface"]
TEMPLATES = {"ml": ML}


@dataclass
class Cache:
    declared: str      # as written in the config
    path: str = None   # expanded and real, or None when refused
    why: str = None    # why it was refused


def declared(config):
    """The config's list, or its template's when the config predates the field."""
    caches = getattr(config, "caches", None)
    if caches is not None:
        return list(caches)
    return list(TEMPLATES.get(getattr(config, "template", None), []))


def resolve(entries, env, repo_root=None):
    """[Cache] for `entries`, expanded against `env` (HOME, variables); refused ones say why."""
    out = []
    forbidden = _forbidden(env, repo_root)
    for entry in entries:
        out.append(_one(entry, env, forbidden))
    return out


def folders(entries, env, repo_root=None, warn=None):
    """The real paths of the accepted caches, made if missing; `warn` gets one line per refusal."""
    paths = []
    for cache in resolve(entries, env, repo_root):
        if cache.path is None:
            if warn and cache.why:
                warn(f"cache {cache.declared!r} is not writable to the benchmark: {cache.why}")
            continue
        try:
            os.makedirs(cache.path, exist_ok=True)
        except OSError as exc:
            if warn:
                warn(f"cache {cache.declared!r} could not be made ({exc.strerror}); the benchmark cannot write it")
            continue
        paths.append(os.path.realpath(cache.path))
    return paths


def _one(entry, env, forbidden):
    text = str(entry).strip()
    home = env.get("HOME") or os.path.expanduser("~")
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    missing = []

    def var(match):
        name = match.group(1) or match.group(2)
        if not env.get(name):
            missing.append(name)
            return ""
        return env[name]
    text = re.sub(r"\$\{(\w+)\}|\$(\w+)", var, text)
    if missing:
        return Cache(entry)   # left out quietly: the tool uses its own default then
    if not os.path.isabs(text):
        return Cache(entry, None, "not an absolute path")
    real = os.path.realpath(text)
    for place, name, beneath_too in forbidden:
        holds = real == place or place.startswith(real.rstrip("/") + "/")
        if holds or beneath_too and real.startswith(place.rstrip("/") + "/"):
            return Cache(entry, None, f"it {'holds' if holds else 'is inside'} {name}")
    return Cache(entry, real)


def _forbidden(env, repo_root):
    """(real path, what it is, whether a cache beneath it is refused too)."""
    import autoresearch
    home = env.get("HOME") or os.path.expanduser("~")
    source = os.path.dirname(os.path.abspath(autoresearch.__file__))
    places = [("/", "the whole file system", False), (home, "the home folder", False),
              (source, "the engine's source", True)]
    if os.path.basename(os.path.dirname(source)) == "src":   # a checkout of the plugin
        places.append((os.path.dirname(os.path.dirname(source)), "the plugin's source", True))
    try:
        places.append((site.getusersitepackages(), "the user's site folder", True))
    except (AttributeError, OSError):
        pass
    if repo_root:
        places.append((repo_root, "the research repo", True))
    return [(os.path.realpath(path), name, beneath) for path, name, beneath in places]

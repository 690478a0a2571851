"""`autoresearch pool up|status|down`, `submit` and `wait`: experiments in waves on a Ray pool.

This module is standard library only: it talks to the pool runner (pool_runner.py, the one
process that imports Ray) through files under `.autoresearch/pool/`:

- `pool.json`        the runner's state: pid, Ray address, GPUs and their class (or why it refused)
- `candidates/N.json` a submitted candidate (its commit is `refs/autoresearch/candidates/N`)
- `go`               `wait` asks the runner for a wave
- `waves/W.json`     a wave: planned, running, or done with its records (`W.reported` once printed)
- `runner.log`       what the runner said

references/scale-out.md describes the contract, references/decision-rule.md the wave's rule.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import autoresearch
from autoresearch import errors, output
from autoresearch.decision import decide
from autoresearch.store import gitops, research, state
from autoresearch.store.files import read_json, write_json_atomic
from autoresearch.store.poolfiles import Paths, alive, info, is_up, queued, status_data, waves  # noqa: F401 (pool.is_up, ...)
from autoresearch.store.research import now_ms

CANDIDATES_REF = "refs/autoresearch/candidates"
WAIT_DEFAULT_S = 540.0     # below the 10-minute ceiling of Claude Code's Bash tool
UP_TIMEOUT_S = 300.0
INSTALL_HINT = "pip install 'autoresearch[pool]'  (or: pip install 'ray>=2.52')"

EXAMPLES = """examples:
  autoresearch pool up                      # a local Ray head on this machine's GPUs (loopback only)
  autoresearch pool up --gpus 4             # 4 logical GPUs on a machine without one (to try the flow)
  autoresearch pool up --address HEAD:6379  # join a running Ray cluster
  autoresearch pool status --json
  autoresearch pool down
"""


def add_parsers(sub):
    p = sub.add_parser("pool", help="a Ray pool of GPUs that runs experiments in waves",
                       description="Start, inspect or stop the pool that runs submitted candidates in waves "
                                   "(one GPU each, beside a control re-run of the incumbent).",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    ps = p.add_subparsers(dest="pool_command", metavar="up|status|down")
    up = ps.add_parser("up", help="start a local Ray head (bound to loopback) or join a cluster")
    up.add_argument("--address", metavar="ADDR", help="a running Ray cluster's head, HOST:PORT")
    up.add_argument("--gpus", type=errors.positive_int, metavar="N",
                    help="declare N logical GPUs (for a machine without one: the whole flow on CPU)")
    up.add_argument("--cpus", type=float, metavar="C", help="CPUs the local head offers (default: all)")
    up.add_argument("--json", action="store_true", help="print one JSON object")
    up.set_defaults(func=cmd_up)
    st = ps.add_parser("status", help="GPUs, their class, busy and queued")
    st.add_argument("--json", action="store_true", help="print one JSON object")
    st.set_defaults(func=cmd_status)
    down = ps.add_parser("down", help="stop the pool (a wave in flight runs again at the next `pool up`)")
    down.add_argument("--json", action="store_true", help="print one JSON object")
    down.set_defaults(func=cmd_down)
    p.set_defaults(func=lambda args: _no_sub(p))

    s = sub.add_parser("submit", help="make the scope change a candidate for the next wave",
                       description="Commit the scope change to the candidate's own ref (not the branch), put the "
                                   "work tree back at the incumbent, and queue it. Same refusals as `run`.",
                       epilog='examples:\n  autoresearch submit -m "double the learning rate"\n'
                              "  autoresearch submit -m \"GELU\" --asi '{\"hypothesis\": \"smoother\"}'",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("-m", "--message", required=True, metavar="TEXT", help="what this candidate changes")
    s.add_argument("--asi", metavar="JSON", help="free-form JSON object stored with the run")
    s.add_argument("--force", action="store_true", help="submit even if the scope repeats an earlier run")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_submit)

    w = sub.add_parser("wait", help="run the submitted candidates as one wave; print its verdicts",
                       description="Run every submitted candidate as one wave, concurrently, beside a control "
                                   "re-run of the incumbent; decide, record and print it. Returns after at most "
                                   "--timeout seconds: then it says \"still running\" and the next `wait` picks "
                                   "the wave up (the wave lives in the pool).",
                       epilog="examples:\n  autoresearch wait\n  autoresearch wait --timeout 100 --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    w.add_argument("--timeout", type=float, default=WAIT_DEFAULT_S, metavar="S",
                   help=f"return after S seconds at most (default {WAIT_DEFAULT_S:g})")
    w.add_argument("--json", action="store_true", help="print one JSON object")
    w.set_defaults(func=cmd_wait)


def _no_sub(parser):
    raise errors.UsageError("pool needs up, status or down")


# --- reading the pool's files (every command) ---

def namespace(repo):
    return "autoresearch-" + hashlib.sha1(os.path.realpath(repo.root).encode()).hexdigest()[:10]


def data_check(config):
    """What each node must have before the pool takes runs (the ML template's prepared data)."""
    if os.environ.get("AUTORESEARCH_POOL_DATA"):
        return os.environ["AUTORESEARCH_POOL_DATA"]
    if config is not None and "prepare.py" in config.fixed:
        return "cache:prepared/manifest.json"
    return None


def next_wave(paths, records):
    numbers = [r.extra.get("wave") for r in records if isinstance(getattr(r, "extra", {}).get("wave"), int)]
    numbers += [w["wave"] for w in waves(paths)]
    return max(numbers, default=0) + 1


def drop_candidate(paths, root, cid):
    try:
        os.unlink(paths.candidate(cid))
    except FileNotFoundError:
        pass
    gitops.git(root, "update-ref", "-d", f"{CANDIDATES_REF}/{cid}", check=False)


def _require_up(repo):
    paths = Paths(repo)
    data = info(paths)
    if not data or data.get("status") != "up":
        raise errors.Refused("no pool is up for this repo; start one with `autoresearch pool up` "
                          "(or `--gpus N` on a machine without a GPU)")
    if not alive(data):
        raise errors.Refused(f"the pool runner (pid {data.get('pid')}) is gone; see {repo.rel(paths.log)}, "
                          "then `autoresearch pool up` again (a wave in flight runs again)")
    return paths, data


# --- pool up / status / down ---

def cmd_up(args):
    repo = research.find()
    research.require_config(research.load(repo, warn=output.warn)[1])
    paths = Paths(repo)
    os.makedirs(paths.dir, exist_ok=True)
    if is_up(repo):
        output.say(args, "autoresearch: the pool is already up")
        return cmd_status(args)
    if args.address and args.gpus:
        raise errors.UsageError("--gpus declares logical GPUs of a local head; a cluster's GPUs are its own "
                             "(drop --gpus, or drop --address)")
    python = os.environ.get("AUTORESEARCH_POOL_PYTHON") or sys.executable
    if not _has_ray(python):
        raise errors.Refused(f"Ray is not installed for {python}; install it with {INSTALL_HINT}")
    package_parent = autoresearch.SRC_DIR
    env = dict(os.environ)
    env["PYTHONPATH"] = package_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # Not RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper: with it, a worker's
    # children are reaped behind our back and every benchmark reads as exit 0 (measured with
    # Ray 2.60). Each run's process group is killed by runner.run instead.
    if not args.address:
        # A local head listens on 127.0.0.1 only (Ray otherwise binds every interface).
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    command = [python, "-m", "autoresearch.pool.pool_runner", "--repo", repo.root]
    if args.address:
        command += ["--address", args.address]
    if args.gpus:
        command += ["--gpus", str(args.gpus)]
    if args.cpus:
        command += ["--cpus", str(args.cpus)]
    try:
        os.unlink(paths.info)
    except FileNotFoundError:
        pass
    with open(paths.log, "ab") as logf:
        proc = subprocess.Popen(command, cwd=repo.root, env=env, stdin=subprocess.DEVNULL, stdout=logf,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + UP_TIMEOUT_S
    while time.monotonic() < deadline:
        data = info(paths)
        if data and data.get("status") == "up":
            return cmd_status(args)
        if data and data.get("status") == "refused":
            proc.wait(timeout=60)
            raise errors.Refused(data.get("reason") or "the pool refused to start")
        if proc.poll() is not None:
            raise errors.Failed(f"the pool runner exited ({proc.returncode}) before it was up: "
                             f"{_last_line(paths.log)} (see {repo.rel(paths.log)})")
        time.sleep(0.2)
    _stop(proc.pid)
    raise errors.Failed(f"the pool was not up after {UP_TIMEOUT_S:g} s; see {repo.rel(paths.log)}")


def _has_ray(python):
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return importlib.util.find_spec("ray") is not None
    try:
        return subprocess.run([python, "-c", "import importlib.util,sys;"
                               "sys.exit(importlib.util.find_spec('ray') is None)"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def cmd_status(args):
    repo = research.find()
    data = status_data(repo)
    if not data["up"]:
        text = "pool: down" + (f" ({data['queued']} candidate(s) queued)" if data["queued"] else "") + \
               "; start it with `autoresearch pool up`"
    else:
        lines = [f"pool: up at {data['address']} ({'local, loopback only' if data['local'] else 'cluster'}), "
                 f"Ray {data['ray_version']}",
                 f"GPUs: {data['gpus']} of class {', '.join(data['classes'])}; busy {data['busy']}, "
                 f"queued candidates {data['queued']}"
                 + (f", wave {data['wave_running']} running" if data["wave_running"] else "")]
        for s in data["slots"]:
            lines.append(f"  {s['host']} GPU {s['index']}: {s['name']}"
                         + (f" ({s['memory_mb']} MB)" if s.get("memory_mb") else ""))
        text = "\n".join(lines)
    output.emit(args, text, data)
    return errors.EXIT_OK


def cmd_down(args):
    repo = research.find()
    paths = Paths(repo)
    data = info(paths)
    if not data or not alive(data):
        try:
            os.unlink(paths.info)
        except FileNotFoundError:
            pass
        output.emit(args, "pool: already down", {"ok": True, "was_up": False})
        return errors.EXIT_OK
    _stop(data["pid"])
    output.emit(args, "pool: down", {"ok": True, "was_up": True})
    return errors.EXIT_OK


def _stop(pid, wait_s=90.0):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        if state.process_start_time(pid) is None or _zombie(pid):
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


def _last_line(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"


# --- submit ---

def cmd_submit(args):
    from autoresearch.pipeline import experiment
    description = args.message.strip().encode("utf-8", "replace").decode("utf-8")
    if not description:
        raise errors.UsageError("-m needs a description of the candidate")
    asi = experiment.parse_asi(args.asi)
    repo = research.find()
    paths, _ = _require_up(repo)
    cand = submit(repo, paths, description, asi, force=args.force)
    text = (f"candidate {cand['id']} submitted ({cand['commit'][:7]} on run {cand['parent_run']}'s code): "
            f"{description}\n{len(queued(paths))} queued; the work tree is back at the incumbent. Next: the "
            "next candidate, or `autoresearch wait` to run the wave")
    output.emit(args, text, {"ok": True, "candidate": cand, "queued": len(queued(paths))})
    return errors.EXIT_OK


def submit(repo, paths, description, asi, force=False):
    """Commit the scope change to refs/autoresearch/candidates/N, restore the work tree, queue it."""
    from autoresearch.pipeline.plan import Request, make_plan
    records, config, runs, _ = research.load(repo, warn=output.warn)
    research.require_config(config)
    best = decide.incumbent(runs)
    if best is None:
        raise errors.Refused("no baseline in this segment yet; run `autoresearch run -m baseline` first "
                          "(with the pool up it measures the baseline as a wave)")
    os.makedirs(paths.candidates, exist_ok=True)
    lock = state.Lock(paths.submit_lock)
    if not lock.acquire(wait_s=10.0):
        raise errors.Refused("another submit is going; try again")
    try:
        q = queued(paths)
        budget = config.max_iterations
        used = decide.iterations_used(runs)
        if budget and used + len(q) >= budget:
            raise errors.Refused(f"the iteration budget is spent ({used} runs and {len(q)} queued candidates of "
                              f"{budget}); `autoresearch wait` for the queued ones, or `autoresearch init` a new "
                              "segment")
        plan = make_plan(repo, config, runs, Request(description, asi, force=force))
        twin = next((c for c in q if c.get("scope_hash") == plan.scope_hash), None)
        if twin is not None and not force:
            raise errors.Refused(f"the scope is identical to queued candidate {twin['id']} ({twin['description']!s:.80}); "
                              "write something else")
        root = repo.root
        scope = config.scope
        head = gitops.head(root)
        cid = _next_id(paths)
        commit = _commit_scope(root, head, scope, f"{description}\n\nautoresearch candidate {cid}")
        gitops.git(root, "update-ref", f"{CANDIDATES_REF}/{cid}", commit)
        cand = {"id": cid, "commit": commit, "parent": plan.best_full, "parent_run": best.run,
                "description": description, "asi": asi, "scope_hash": plan.scope_hash,
                "scope_lines": plan.scope_lines, "submitted": now_ms()}
        write_json_atomic(paths.candidate(cid), cand)
        _restore_scope(root, head, scope)
        return cand
    finally:
        lock.release()


def _next_id(paths):
    try:
        with open(paths.counter) as f:
            n = int(f.read().strip() or 0)
    except (OSError, ValueError):
        n = 0
    n = max([n] + [c["id"] for c in queued(paths)] + [cid for w in waves(paths) for cid in w.get("candidates", [])]) + 1
    with open(paths.counter + ".tmp", "w") as f:
        f.write(f"{n}\n")
    os.replace(paths.counter + ".tmp", paths.counter)
    return n


def _commit_scope(root, head, scope, message):
    """A commit of HEAD's tree with the work tree's scope files, made in a throw-away index: the
    branch, the real index and the work tree are not touched."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))

        def g(*a):
            p = subprocess.run(gitops.command(*a), cwd=root, env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise gitops.GitError(f"git {' '.join(a[:2])}: {p.stderr.strip()}")
            return p.stdout.strip()
        g("read-tree", head)
        g("add", "-A", "--", *scope)
        tree = g("write-tree")
        ident = [] if gitops.has_identity(root) else gitops.FALLBACK_IDENTITY
        return g(*ident, "commit-tree", tree, "-p", head, "-m", message)


def _restore_scope(root, head, scope):
    """Put the scope's files back as HEAD has them (the candidate's commit holds the change)."""
    tracked = gitops.git(root, "ls-tree", "-r", "-z", "--name-only", head, "--", *scope) or ""
    if tracked:
        gitops.git(root, "checkout", "-q", head, "--", *[p for p in tracked.split("\0") if p])
    for path in gitops.untracked(root, scope):
        try:
            os.unlink(os.path.join(root, path))
        except OSError:
            pass


# --- wait ---

def cmd_wait(args):
    if args.timeout < 0:
        raise errors.UsageError("--timeout must be >= 0 seconds")
    repo = research.find()
    return _wait(args, repo, args.timeout)


def _wait(args, repo, timeout, for_candidate=None, calibration=None):
    paths, _ = _require_up(repo)
    deadline = time.monotonic() + timeout
    target = None
    asked = now_ms()
    while True:
        done, running = _find_wave(paths, for_candidate)
        if done is not None:
            return _report(args, repo, paths, done)
        failure = read_json(paths.failure)
        if failure and failure.get("at", 0) >= asked and running is None:
            raise errors.Failed(f"the pool could not run the wave: {failure.get('error')}; see {repo.rel(paths.log)}")
        if running is None and target is None:
            if calibration is None and not queued(paths) and for_candidate is None:
                raise errors.Refused("nothing is submitted; `autoresearch submit -m TEXT` the candidates first")
            if not os.path.exists(paths.go):
                write_json_atomic(paths.go, dict(calibration or {}, requested=now_ms()))
            target = True
        if running is not None:
            target = running["wave"]
        if time.monotonic() >= deadline:
            break
        if not alive(info(paths)):
            raise errors.Refused(f"the pool runner stopped; see {repo.rel(paths.log)}, then `autoresearch pool up`")
        time.sleep(0.2)
    w = running["wave"] if running else None
    text = (f"wave {w} still running" if w else "still running: the wave is starting") + \
           "; run `autoresearch wait` again to pick it up"
    output.emit(args, text, {"wave": w, "runs": [], "status": "running", "message": text})
    return errors.EXIT_OK


def _find_wave(paths, for_candidate):
    """(the oldest decided wave not printed yet, the wave in flight)."""
    done = running = None
    for w in waves(paths):
        if w.get("status") == "running":
            running = w
        elif w.get("status") == "done" and not os.path.exists(paths.wave(w["wave"]) + ".reported"):
            if for_candidate is None or for_candidate in (w.get("candidates") or []) or \
                    for_candidate == "calibration" and not w.get("candidates"):
                done = done or w
    return done, running


def _report(args, repo, paths, w):
    with open(paths.wave(w["wave"]) + ".reported", "w") as f:
        f.write(f"{now_ms()}\n")
    text = wave_text(repo, w)
    data = {"wave": w["wave"], "runs": w["runs"], "status": "done", "notes": w.get("notes", []),
            "superseded": w.get("superseded", []), "contention": w.get("contention"), "message": text}
    output.emit(args, text, data)
    return errors.EXIT_OK


def wave_text(repo, w):
    config = research.load(repo, warn=lambda m: None)[1]
    name = config.metric_name if config else "metric"
    runs = w["runs"]
    k = sum(r["role"] == "candidate" for r in runs)
    lines = [f"wave {w['wave']}: {k} candidate(s) beside the control of run {w.get('parent_run')}'s code" if k
             else f"wave {w['wave']}: calibration ({len(runs)} measurement(s) of the code at HEAD)"]
    for r in runs:
        label = {"candidate": f"candidate {r.get('candidate')}", "control": "control",
                 "confirm": f"re-run of run {r.get('repeat_of')}", "baseline": "baseline"}.get(r["role"], r["role"])
        head = f"  run {r['run']} ({label}): {r['status'].upper()}"
        if r.get("metric") is not None:
            head += f"  {name}={r['metric']:.6g}"
        if r.get("delta") is not None and r["role"] == "candidate":
            head += f" (gain {r['delta']:+.6g} vs control)"
        lines.append(head)
        lines.append(f"    {r.get('description', '')!s:.100}: {r.get('reason')}")
        if r.get("diagnosis"):
            lines.append(f"    diagnosis: {r['diagnosis'].get('family')}: {r['diagnosis'].get('explanation', '')!s:.200}")
    kept = [r for r in runs if r["status"] == "keep"]
    ups = [r for r in runs if r.get("runner_up")]
    lines.append(f"kept: run {kept[0]['run']} ({kept[0]['description']!s:.80}); HEAD holds it" if kept
                 else "kept: nothing this wave; HEAD stays at the incumbent")
    if ups:
        lines.append("runners-up that beat the parent: " + ", ".join(f"run {r['run']}" for r in ups) +
                     " (rebase them on the new best and submit them again)")
    lines.extend(f"note: {n}" for n in w.get("notes", []))
    lines.append("next: submit the next wave's candidates (`autoresearch submit -m ...`), then `autoresearch wait`")
    return "\n".join(lines)


# --- `run` with a pool up: submit + wait of one ---

def route(args):
    """`run` while a pool serves this repo is a wave of one, run by the pool (cli.py asks here
    before the pipeline runs it on this machine); None when no pool is up."""
    from autoresearch.pipeline import experiment
    request = experiment.request_from(args)   # the same refusals, in the same order, as a run
    repo = research.find()
    if os.path.exists(Paths(repo).info) and is_up(repo):
        return run_through_pool(args, repo, request)
    return None


def run_through_pool(args, repo, request):
    description, asi = request.description, request.asi
    paths, _ = _require_up(repo)
    runs = research.load(repo, warn=output.warn)[2]
    best = decide.incumbent(runs)
    quiet = argparse.Namespace(json=True)
    if best is None or args.baseline:
        config = research.load(repo, warn=lambda m: None)[1]
        count = args.repeat or (config.noise_runs if best is None and config else None) or 1
        return _finish_run(args, repo, paths, _capture(lambda: _wait(quiet, repo, 1e9, "calibration",
                                                                     {"controls": count, "description": description,
                                                                      "asi": asi})))
    cand = submit(repo, paths, description, asi, force=args.force)
    return _finish_run(args, repo, paths, _capture(lambda: _wait(quiet, repo, 1e9, cand["id"])), cand["id"])


def _capture(fn):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        fn()
    return json.loads(buf.getvalue().strip().splitlines()[-1])


def _finish_run(args, repo, paths, data, cid=None):
    runs = data.get("runs") or []
    mine = [r for r in runs if cid is not None and r.get("candidate") == cid and r["role"] == "candidate"]
    record = mine[0] if mine else (runs[0] if runs else None)
    text = data.get("message", "")
    out = {"ok": True, "status": record["status"] if record else None, "record": record, "records": runs,
           "wave": data.get("wave"), "message": text}
    output.emit(args, text, out)
    return errors.EXIT_OK

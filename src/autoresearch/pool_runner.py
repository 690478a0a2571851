"""The pool runner: the long-lived process behind `autoresearch pool up` (the Ray driver).

It is the one writer of the log while the pool is up. It starts a local Ray head bound to
loopback (or joins a cluster), checks every node (GPUs, their class, the prepared data),
then waits for `autoresearch wait` to ask for a wave. A wave: every queued candidate plus a
control re-run of their parent (the incumbent), one GPU each, at the same time. The runner
collects the results into `.autoresearch/runs/N/`, decides with wave.py, appends the records
in run-number order, moves HEAD on a keep, and writes `.autoresearch/pool/waves/W.json` for
`wait` to print. A wave survives the `wait` that asked for it; a runner killed mid-wave
leaves the wave file `running`, and the next runner runs that wave again from the start (a
partial run is never a measurement).

Ray is imported here and in nothing the engine loads without a pool.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from autoresearch import decide, gitops, log, metrics, pool, research, state, wave
from autoresearch.research import now_ms

TASK_RETRIES = 3          # Ray's own retries of a task whose worker or node died
RESUBMITS = 2             # ours, after Ray gave up (every node of the class was lost for a while)
PROJECT_FILES = ("pyproject.toml", "uv.lock", ".python-version")


def say(text):
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class Runner:
    def __init__(self, repo, paths, args):
        self.repo, self.paths, self.args = repo, paths, args
        self.stopping = False
        self.ray = None
        self.head_node = None
        self.info = None

    # --- start-up ---

    def start(self):
        import ray
        self.ray = ray
        # Our package travels with the tasks, so workers on other machines need no install.
        package = os.path.dirname(os.path.abspath(__file__))
        runtime_env = {"py_modules": [package]} if self.args.address else None
        common = dict(namespace=pool.namespace(self.repo), log_to_driver=False, runtime_env=runtime_env)
        if self.args.address:
            ray.init(address=self.args.address, **common)
        else:
            cpus = self.args.cpus or os.cpu_count() or 1
            # Keep one idle worker per GPU (Ray's default keeps one per CPU), so a wave's runs
            # start together instead of waiting for fresh worker processes.
            gpus = self.args.gpus if self.args.gpus is not None else _visible_gpus()
            ray.init(num_cpus=cpus, num_gpus=self.args.gpus, include_dashboard=False,
                     _node_ip_address="127.0.0.1",
                     _system_config={"num_workers_soft_limit": max(int(cpus), gpus + 1)}, **common)
        self.head_node = ray.get_runtime_context().get_node_id()
        self.remote_run = ray.remote(max_retries=TASK_RETRIES, retry_exceptions=False)(_run_task)
        self.remote_probe = ray.remote(_probe_task)
        return self._check_nodes()

    def _check_nodes(self):
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        config = research.load(self.repo)[1] or {}
        data_check = pool.data_check(config)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        probes = [self.remote_probe.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote(data_check) for n in nodes]
        found = ray.get(probes, timeout=180)
        slots, missing = [], []
        here = "%d.%d" % sys.version_info[:2]
        cpu_share = None
        for node, info in zip(nodes, found):
            res = node.get("Resources") or {}
            count = int(res.get("GPU", 0))
            if info["python"] != here:
                return self._refuse(f"node {info['host']} runs Python {info['python']}, the pool runner "
                                    f"{here}; Ray needs the same Python minor on every node")
            if info["data"] is not None and not info["data"]["present"]:
                missing.append(f"{info['host']} ({info['data']['path']})")
            real = info["gpus"][:count]
            for i in range(count):
                g = real[i] if i < len(real) else None
                name = g["name"] if g else "logical GPU"
                mem = g["memory_mb"] if g else None
                slots.append({"node": node["NodeID"], "host": info["host"], "index": i, "name": name,
                              "memory_mb": mem, "class": f"{name}|{mem}MB" if mem else name})
            if count:
                share = float(res.get("CPU", 0)) / count
                cpu_share = share if cpu_share is None else min(cpu_share, share)
        if missing:
            return self._refuse("the prepared data is missing on " + ", ".join(missing) +
                                "; run `uv run prepare.py` on each of them (in a copy of this repo), "
                                "then `autoresearch pool up` again")
        if not slots:
            return self._refuse("the pool has no GPU; on a machine without one, declare logical GPUs "
                                "with `autoresearch pool up --gpus N`")
        classes = sorted({s["class"] for s in slots})
        if len(classes) > 1:
            return self._refuse("the pool mixes GPU classes (" + ", ".join(classes) + "); runs on different "
                                "GPUs do not compare under a fixed time budget: start it on GPUs of one class")
        context = ray.get_runtime_context()
        self.cpus_per_task = max(0.01, round(min(cpu_share or 1.0, 64.0), 2))
        self.info = {"status": "up", "pid": os.getpid(), "pid_start": state.process_start_time(os.getpid()),
                     "address": context.gcs_address, "local": not self.args.address,
                     "ray_version": ray.__version__, "python": here, "namespace": pool.namespace(self.repo),
                     "gpus": len(slots), "slots": slots, "classes": classes, "nodes": len(nodes),
                     "cpus_per_task": self.cpus_per_task, "data_check": data_check, "started": now_ms()}
        # One worker per GPU started now, so the first wave's runs start together.
        warm = ray.remote(_probe_task)
        ray.get([warm.options(num_gpus=1, num_cpus=self.cpus_per_task).remote(None) for _ in slots], timeout=300)
        research.write_json_atomic(self.paths.info, self.info)
        say(f"pool up: {len(slots)} GPU(s) of class {classes[0]} on {len(nodes)} node(s), Ray {ray.__version__}")
        return True

    def _refuse(self, reason):
        say(f"refused: {reason}")
        research.write_json_atomic(self.paths.info, {"status": "refused", "reason": reason, "pid": os.getpid()})
        return False

    # --- the loop ---

    def serve(self):
        for w in pool.waves(self.paths):
            if w.get("status") == "running":
                say(f"wave {w['wave']} was cut short by the last runner; running it again")
                self.run_wave(w)
        while not self.stopping:
            request = research.read_json(self.paths.go)
            if request is not None:
                try:
                    self.run_wave(None, request)
                finally:
                    _unlink(self.paths.go)
            else:
                time.sleep(0.2)

    def run_wave(self, resumed, request=None):
        lock = state.Lock(self.repo.lock)
        while not lock.acquire(wait_s=1.0):
            if self.stopping:
                return
        w = Wave(self, resumed, request or {})
        try:
            w.execute()
        except Exception as exc:  # a bug must not take the pool down; `wait` reports it
            say("wave failed:\n" + traceback.format_exc())
            failure = {"status": "failed", "error": f"{type(exc).__name__}: {_one_line(exc)}", "at": now_ms()}
            research.write_json_atomic(self.paths.failure, failure)
            if getattr(w, "plan", None):
                w.plan.update(failure)
                research.write_json_atomic(self.paths.wave(w.plan["wave"]), w.plan)
        finally:
            lock.release()


class Wave:
    """One wave from plan to records."""

    def __init__(self, runner, resumed, request):
        self.r, self.repo, self.paths = runner, runner.repo, runner.paths
        self.resumed, self.request = resumed, request
        self.notes = []
        self._extra = []    # the confirmation's re-run and control

    def execute(self):
        records, config, runs, segment = research.load(self.repo, warn=say)
        if config is None:
            return
        if state.recover(self.repo, records, config, runs, segment, say):
            records, config, runs, segment = research.load(self.repo, warn=say)
        self.records, self.config, self.runs, self.segment = records, config, runs, segment
        self.rules = decide.Rules.from_config(config)
        best = decide.incumbent(runs)
        plan = self.resumed or self._plan(best)
        if plan is None:
            return
        self.plan = plan
        os.makedirs(self.paths.waves_dir, exist_ok=True)
        research.write_json_atomic(self.paths.wave(plan["wave"]), plan)
        started = now_ms()
        results = self._dispatch(plan["runs"])
        outcome = self._decide(plan, best, results)
        plan.update(status="done", started=started, ended=now_ms(), runs=outcome, notes=self.notes)
        self._record(plan, started)
        research.write_json_atomic(self.paths.wave(plan["wave"]), plan)
        say(f"wave {plan['wave']} done: " + ", ".join(f"run {x['run']} {x['status']}" for x in outcome))

    # --- plan ---

    def _plan(self, best):
        queued = pool.queued(self.paths)
        root = self.repo.root
        number = research.next_run_number(self.records, self.repo)
        wave_no = pool.next_wave(self.paths, self.records)
        planned = []
        if best is None or not queued:
            # A calibration wave (no baseline yet, or `run --baseline`): the code at HEAD, K times.
            count = max(1, int(self.request.get("controls") or 1))
            head = gitops.head(root)
            scope_hash, lines = research.scope_fingerprint(self.repo, self.config.get("scope") or [])
            commit = gitops.run_ref(root, best["run"]) if best else head
            for i in range(count):
                role = "baseline" if best is None and i == 0 else "control"
                planned.append(self._slot(number + i, role, commit, best, None,
                                          self.request.get("description") or ("baseline" if best is None else
                                                                              "control"),
                                          self.request.get("asi") or {}, scope_hash if best is None else
                                          best.get("scope_hash"), lines if best is None else best.get("scope_lines")))
            return {"wave": wave_no, "status": "running", "parent": commit, "parent_run": best and best["run"],
                    "runs": planned, "candidates": [], "superseded": [], "requested": self.request}
        parent = gitops.run_ref(root, best["run"]) or gitops.head(root)
        control = self._slot(number, "control", parent, best, None, f"control: run {best['run']}'s code", {},
                             best.get("scope_hash"), best.get("scope_lines"))
        planned.append(control)
        superseded = []
        taken = []
        for cand in queued:
            commit = cand["commit"]
            if cand.get("parent") != parent:
                commit = _rebase(root, cand, parent)
                if commit is None:
                    superseded.append(cand["id"])
                    pool.drop_candidate(self.paths, root, cand["id"])
                    self.notes.append(f"candidate {cand['id']} no longer applies on run {best['run']}'s code "
                                      "(conflict); it was dropped: write it again")
                    continue
                self.notes.append(f"candidate {cand['id']} was rebased onto run {best['run']}")
            taken.append(cand["id"])
            planned.append(self._slot(number + len(planned), "candidate", commit, best, cand["id"],
                                      cand["description"], cand.get("asi") or {}, cand["scope_hash"],
                                      cand.get("scope_lines")))
        return {"wave": wave_no, "status": "running", "parent": parent, "parent_run": best["run"],
                "runs": planned, "candidates": taken, "superseded": superseded, "requested": self.request}

    def _slot(self, run, role, commit, best, cand_id, description, asi, scope_hash, scope_lines):
        return {"run": run, "role": role, "commit": commit, "candidate": cand_id, "description": description,
                "asi": asi, "scope_hash": scope_hash, "scope_lines": scope_lines,
                "repeat_of": best["run"] if best is not None and role in ("control",) else None}

    # --- dispatch and collect ---

    def _spec(self, slot):
        root = self.repo.root
        config = self.config
        paths = list(config.get("scope") or []) + sorted((config.get("fixed") or {}).keys()) + list(PROJECT_FILES)
        files = _commit_files(root, slot["commit"], paths)
        timeout = float(config.get("timeout_s") or 0) or None
        return {"run": slot["run"], "commit": slot["commit"], "repo": root, "head_node": self.r.head_node,
                "files": files[0], "executable": files[1], "command": config["command"], "timeout_s": timeout,
                "checks": config.get("checks"), "checks_timeout_s": config.get("checks_timeout_s")}

    def _dispatch(self, slots):
        """Run `slots` at once, one GPU each; return {run: result}. Node loss: retried, never a crash."""
        ray = self.r.ray
        specs = {s["run"]: self._spec(s) for s in slots}
        attempts = {s["run"]: 1 for s in slots}
        pending = {}

        def submit(run):
            ref = self.r.remote_run.options(num_gpus=1, num_cpus=self.r.cpus_per_task).remote(specs[run])
            pending[ref] = run

        nodes_before = self._alive_nodes()
        for s in slots:
            submit(s["run"])
        results = {}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            if self.r.stopping:
                for ref in pending:
                    ray.cancel(ref, force=True)
                raise SystemExit("pool going down mid-wave; the wave runs again at the next pool up")
            for ref in ready:
                run = pending.pop(ref)
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:   # our task raised: a real failure
                    results[run] = {"run": run, "error": _one_line(exc), "attempt": attempts[run]}
                    continue
                except (ray.exceptions.RayError, OSError) as exc:  # worker or node lost, beyond Ray's retries
                    if attempts[run] <= RESUBMITS:
                        attempts[run] += 1
                        self.notes.append(f"run {run}: node lost ({type(exc).__name__}); re-run "
                                          f"(attempt {attempts[run]})")
                        submit(run)
                    else:
                        results[run] = {"run": run, "lost": True, "attempt": attempts[run]}
                    continue
                if self._cut_by_node_loss(res) and attempts[run] <= RESUBMITS:
                    attempts[run] += 1
                    self.notes.append(f"run {run}: killed by {res['exit_code']} as its node went down; re-run")
                    submit(run)
                    continue
                res["attempt"] = attempts[run]
                self._store(run, res)
                results[run] = res
        lost = nodes_before - self._alive_nodes()
        if lost:
            self.notes.append(f"{len(lost)} node(s) lost during the wave; Ray ran their tasks again on the "
                              "nodes left (a run cut short by node loss is re-run, never recorded as a crash)")
        return results

    def _alive_nodes(self):
        return {n["NodeID"] for n in self.r.ray.nodes() if n.get("Alive")}

    def _cut_by_node_loss(self, res):
        """A benchmark killed by a signal on a node that is gone now was cut short, not crashed."""
        code = res.get("exit_code")
        if not isinstance(code, int) or code >= 0:
            return False
        return res.get("node") not in self._alive_nodes()

    def _store(self, run, res):
        run_dir = self.repo.run_dir(run)
        os.makedirs(run_dir, exist_ok=True)
        for name, data in (res.pop("files", None) or {}).items():
            path = os.path.join(run_dir, name)
            if os.path.realpath(path).startswith(os.path.realpath(run_dir) + os.sep):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)

    # --- decide ---

    def _decide(self, plan, best, results):
        recs = {s["run"]: self._record_for(s, results.get(s["run"])) for s in plan["runs"]}
        controls = [r for r in recs.values() if r["role"] in ("control", "baseline")]
        cands = [r for r in recs.values() if r["role"] == "candidate"]
        lost = [r for r in recs.values() if r.get("_lost")]
        for r in lost:   # never recorded as the candidate's crash: back in the queue
            if r.get("candidate") is not None:
                self.notes.append(f"candidate {r['candidate']}: its node was lost {r['attempt']} times; "
                                  "it stays queued for the next wave")
        done = [r for r in recs.values() if not r.get("_lost")]
        if best is None:
            self._decide_calibration(controls)
            return [_public(r) for r in sorted(done, key=lambda r: r["run"])]
        prior = list(self.runs)
        measured_controls = [c for c in controls if decide.is_measurement(dict(c, status="discard"))]
        for c in controls:
            if c.get("status") is None:
                c.update(status="discard", reason=f"control of wave {plan['wave']}: "
                         f"{decide.remeasurement_reason(best['run'])}", repeat_of=best["run"])
        prior_plus = prior + [dict(c) for c in measured_controls]
        stats = decide.noise(prior_plus, self.rules)
        k = len(cands)
        th = wave.thresholds(k, stats["sigma"] if stats["source"] == "repeats" else None, self.rules)
        if measured_controls:
            control = measured_controls[0]
            ref_value, ref_run = control["metric"], control["run"]
        else:   # no control measurement: compare with the incumbent's value, and say so
            ref_value, ref_run = decide.value_of(prior, best), None
            self.notes.append("the control did not give a measurement; candidates were compared with the "
                              "incumbent's value over its earlier measurements")
        decidable = [(r["run"], r["metric"]) for r in cands if r.get("status") is None]
        verdicts, winner = wave.decide_wave(decidable, ref_value, th, self.rules)
        if winner is not None and verdicts[winner].needs_confirmation:
            self._confirm(plan, recs, verdicts[winner], th, best)
        best_value = decide.value_of(prior_plus, best)
        for r in cands:
            r.update(control_run=ref_run, control_metric=ref_value, thresholds=th.as_record(),
                     best_before=best_value, threshold=th.screen)
            v = verdicts.get(r["run"])
            if v is None:
                continue
            r.update(status=v.status, reason=v.reason, delta=v.delta, rank_in_wave=v.rank,
                     runner_up=v.runner_up, value=r["metric"],
                     confidence=round(v.delta / th.sigma_d, 3) if th.sigma_d else None)
            r.update(v.extra)
            if v.implausible:
                self._diagnose(r, "implausible")
        for c in controls:
            c.update(best_before=best_value, threshold=th.screen, thresholds=th.as_record())
        return [_public(r) for r in sorted(done + self._extra, key=lambda r: r["run"])]

    def _decide_calibration(self, controls):
        ok = [c for c in controls if c.get("status") is None]
        base = None
        for c in sorted(ok, key=lambda c: c["run"]):
            if base is None:
                c.update(status="keep", reason="baseline: first measurement of the segment", value=c["metric"])
                base = c
            else:
                c.update(status="discard", repeat_of=base["run"],
                         reason=f"{decide.remeasurement_reason(base['run'])} (calibration wave)")

    def _confirm(self, plan, recs, verdict, th, best):
        """The borderline winner again, beside a fresh control, right away (same wave number)."""
        winner = recs[verdict.run]
        number = max(recs) + 1
        again = self._slot(number, "confirm", winner["_commit"], best, winner.get("candidate"),
                           winner["description"], winner.get("asi") or {}, winner["scope_hash"],
                           winner.get("scope_lines"))
        again["repeat_of"] = verdict.run
        ctrl = self._slot(number + 1, "control", plan["parent"], best, None, f"control: run {best['run']}'s code",
                          {}, best.get("scope_hash"), best.get("scope_lines"))
        plan["runs"].extend([again, ctrl])
        research.write_json_atomic(self.paths.wave(plan["wave"]), plan)
        results = self._dispatch([again, ctrl])
        a, c = self._record_for(again, results.get(number)), self._record_for(ctrl, results.get(number + 1))
        delta = None
        if a.get("status") is None and c.get("status") is None:
            delta = decide.gain(self.rules.direction, c["metric"], a["metric"])
        wave.settle_confirmation(verdict, delta, th, number)
        if a.get("status") is None:
            a.update(status="discard", delta=delta, control_run=number + 1, control_metric=c.get("metric"),
                     reason=f"{decide.remeasurement_reason(verdict.run)}: confirmation re-run of the wave winner")
        if c.get("status") is None:
            c.update(status="discard", repeat_of=best["run"],
                     reason=f"control of wave {plan['wave']}'s confirmation: {decide.remeasurement_reason(best['run'])}")
        self._extra = [x for x in (a, c) if not x.get("_lost")]

    # --- records ---

    def _record_for(self, slot, res):
        """The log record of one run (status None while the rule has not decided it)."""
        run = slot["run"]
        run_dir = self.repo.run_dir(run)
        os.makedirs(run_dir, exist_ok=True)
        name = self.config.get("metricName")
        res = res or {"lost": True, "attempt": 0}
        text = _read(os.path.join(run_dir, "output.log"))
        found, warnings = metrics.parse(text)
        rec = {"run": run, "commit": gitops.short(slot["commit"]), "metric": found.get(name), "metrics": found,
               "status": None, "description": slot["description"], "timestamp": now_ms(),
               "segment": self.segment, "confidence": None, "asi": slot.get("asi") or {},
               "duration_s": res.get("duration_s"), "reason": None, "best_before": None, "threshold": None,
               "diagnosis": None, "run_dir": self.repo.rel(run_dir), "ref": f"{gitops.RUNS_REF}/{run}",
               "scope_hash": slot.get("scope_hash"), "scope_lines": slot.get("scope_lines"),
               "repeat_of": slot.get("repeat_of"), "exit_code": res.get("exit_code"), "policy": "wave",
               "wave": self.plan["wave"], "role": slot["role"], "control": slot["role"] == "control",
               "candidate": slot.get("candidate"), "attempt": res.get("attempt"),
               "slot": {"node": res.get("node"), "host": res.get("host"),
                        "cuda_visible_devices": res.get("cuda_visible_devices"), "snapshot": res.get("snapshot")},
               "gpu_s": round(res["bench_ended"] - res["bench_started"], 3) if res.get("bench_ended") else None,
               "bench_started": _ms(res.get("bench_started")), "bench_ended": _ms(res.get("bench_ended")),
               "wave_gpus": self.r.info["gpus"] if self.r.info else None,
               "_commit": slot["commit"], "_lost": bool(res.get("lost"))}
        for w in warnings:
            say(f"run {run}: {w}")
        if res.get("lost"):
            return rec
        if res.get("error"):
            self._fail(rec, "crash", f"the pool task failed: {res['error']}")
        elif res.get("timed_out"):
            self._fail(rec, "timeout", f"timed out after {float(self.config.get('timeout_s') or 0):g} s "
                                       "(process group killed)")
        elif res.get("exit_code") != 0:
            self._fail(rec, "crash", _exit_text(res.get("exit_code")))
        elif name not in found:
            self._fail(rec, "crash", f"no valid METRIC {name}=<number> line in the output")
        elif res.get("checks") and (res["checks"]["timed_out"] or res["checks"]["exit_code"] != 0):
            rec["status"], rec["reason"] = "checks_failed", "checks failed"
        return rec

    def _fail(self, rec, status, reason):
        rec["status"], rec["reason"] = status, reason
        if status in ("crash", "timeout"):
            rec["metric"] = None
            self._diagnose(rec, status)

    def _diagnose(self, rec, status):
        run_dir = os.path.join(self.repo.root, rec["run_dir"])
        try:
            from autoresearch import diagnosis
            result = diagnosis.for_run(self.repo.root, run_dir, status, rec.get("metrics") or {}, None,
                                       self.config.get("bestDirection", "lower"), rec["reason"])
        except Exception as exc:  # never lose a run to the diagnoser
            result = {"family": "UNKNOWN", "codes": [], "intermediates": {}, "fix": {},
                      "explanation": "the diagnoser could not run", "error": f"{type(exc).__name__}: {exc}"}
        rec["diagnosis"] = result
        try:
            with open(os.path.join(run_dir, "diagnosis.json"), "w", encoding="utf-8") as f:
                f.write(json.dumps(result, indent=1, ensure_ascii=False, default=str) + "\n")
        except (OSError, TypeError, ValueError):
            pass

    def _record(self, plan, started):
        """Append the wave's records in run-number order, keep their refs, move HEAD on a keep."""
        root = self.repo.root
        ended = now_ms()
        kept = None
        for rec in plan["runs"]:
            rec.update(wave_started=started, wave_ended=ended)
            gitops.set_run_ref(root, rec["run"], _full(root, rec["commit"]))
            try:
                with open(os.path.join(self.repo.run_dir(rec["run"]), "diff.patch"), "w", encoding="utf-8") as f:
                    f.write(gitops.diff_patch(root, _full(root, rec["commit"])))
            except (OSError, gitops.GitError):
                pass
            log.append(self.repo.log, rec, warn=say)
            if rec["status"] == "keep":
                kept = rec
        if kept is not None and kept["role"] == "candidate":
            self._move_head(_full(root, kept["commit"]))
        recorded = {r.get("candidate") for r in plan["runs"]}
        for cid in plan.get("candidates") or []:
            if cid in recorded:   # a candidate whose node was lost every time stays queued
                pool.drop_candidate(self.paths, root, cid)

    def _move_head(self, commit):
        """Fast-forward the branch to the kept commit, keeping the agent's uncommitted edits."""
        root = self.repo.root
        if gitops.git(root, "merge", "--ff-only", "-q", commit, check=False) is not None:
            return
        stashed = gitops.git(root, "stash", "push", "-q", "-m", "autoresearch: edits made during a wave",
                             check=False) is not None
        if gitops.git(root, "merge", "--ff-only", "-q", commit, check=False) is None:
            self.notes.append(f"HEAD could not move to the kept commit {commit[:7]}; "
                              f"`git merge --ff-only {commit[:7]}`")
        if stashed and gitops.git(root, "stash", "pop", "-q", check=False) is None:
            self.notes.append("your edits made during the wave conflict with the kept change; they are in "
                              "`git stash list` (autoresearch: edits made during a wave)")


def _rebase(root, cand, parent):
    """The candidate's change applied on `parent` (a 3-way merge of its scope diff), or None."""
    diff = gitops.git(root, "diff", "--binary", cand["parent"], cand["commit"], check=False)
    if diff is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        def g(*args, input=None):
            p = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, input=input)
            return p.stdout.strip() if p.returncode == 0 else None
        if g("read-tree", parent) is None or g("apply", "--cached", "--3way", input=diff + "\n") is None:
            return None
        tree = g("write-tree")
        ident = [] if gitops.has_identity(root) else gitops.FALLBACK_IDENTITY
        message = gitops.git(root, "log", "-1", "--format=%B", cand["commit"])
        commit = g(*ident, "commit-tree", tree, "-p", parent, "-m", message) if tree else None
    return commit


def _visible_gpus():
    from autoresearch import pool_task
    return len(pool_task.probe(None)["gpus"])


def _commit_files(root, commit, paths):
    from autoresearch import snapshot
    listing = gitops.git(root, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths) or ""
    executable = [item.split("\t", 1)[1] for item in listing.split("\0") if item.startswith("100755 ")]
    return snapshot.commit_files(root, commit, paths), executable


def _full(root, short):
    return gitops.git(root, "rev-parse", "--verify", "-q", f"{short}^{{commit}}")


def _public(rec):
    return {k: v for k, v in rec.items() if not k.startswith("_")}


def _ms(t):
    return int(t * 1000) if isinstance(t, (int, float)) else None


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _exit_text(code):
    if isinstance(code, int) and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def _one_line(exc):
    return " ".join(str(exc).split())[-300:]


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# --- the Ray tasks (module-level functions, shipped by reference to autoresearch.pool_task) ---

def _run_task(spec):
    import ray
    from autoresearch import pool_task
    return pool_task.run_experiment(spec, ray.get_runtime_context().get_node_id())


def _probe_task(data_check):
    from autoresearch import pool_task
    return pool_task.probe(data_check)


def main(argv=None):
    p = argparse.ArgumentParser(prog="autoresearch-pool-runner")
    p.add_argument("--repo", required=True)
    p.add_argument("--address")
    p.add_argument("--gpus", type=int)
    p.add_argument("--cpus", type=float)
    args = p.parse_args(argv)
    repo = research.Repo(args.repo)
    paths = pool.Paths(repo)
    runner = Runner(repo, paths, args)

    def stop(signum, frame):
        runner.stopping = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        if runner.start():
            runner.serve()
    except SystemExit as exc:
        say(str(exc))
    except Exception:
        say("pool runner failed:\n" + traceback.format_exc())
        info = research.read_json(paths.info) or {}
        if info.get("status") != "up":
            research.write_json_atomic(paths.info, {"status": "refused", "pid": os.getpid(),
                                                    "reason": "the pool runner failed to start; see "
                                                              f"{repo.rel(paths.log)}"})
    finally:
        try:
            if runner.ray is not None:
                runner.ray.shutdown()
        finally:
            info = research.read_json(paths.info) or {}
            if info.get("pid") == os.getpid() and info.get("status") == "up":
                _unlink(paths.info)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import autoresearch
from autoresearch.decision import decide, holdout
from autoresearch.pipeline import recovery, verdict
from autoresearch.pool import pool, wave
from autoresearch.store import gitops, log, research, state
from autoresearch.store.files import read_json, write_json_atomic
from autoresearch.store.research import now_ms

TASK_RETRIES = 3          # Ray's own retries of a task whose worker or node died
RESUBMITS = 2             # ours, after Ray gave up (every node of the class was lost for a while)
NODE_LOSS_GRACE_S = 45    # how long a signal death waits for Ray to say whether its node is gone
CONTENTION_RERUNS = 1     # a contended wave (its control slowed) runs again this many times
PROJECT_FILES = ("pyproject.toml", "uv.lock", ".python-version")


def say(text):
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class Runner:
    def __init__(self, repo, paths, args):
        self.repo, self.paths, self.args = repo, paths, args
        self.stopping = False
        self.ray = None
        self.head_node = None
        self.ledger = None
        self.info = None

    # --- start-up ---

    def start(self):
        import ray
        self.ray = ray
        # Our package travels with the tasks, so workers on other machines need no install.
        package = autoresearch.PACKAGE_DIR
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
        self.ledger = _start_ledger(ray, self.head_node)
        return self._check_nodes()

    def _check_nodes(self):
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        data_check = pool.data_check(research.load(self.repo)[1])
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
        write_json_atomic(self.paths.info, self.info)
        say(f"pool up: {len(slots)} GPU(s) of class {classes[0]} on {len(nodes)} node(s), Ray {ray.__version__}")
        return True

    def _refuse(self, reason):
        say(f"refused: {reason}")
        write_json_atomic(self.paths.info, {"status": "refused", "reason": reason, "pid": os.getpid()})
        return False

    # --- the loop ---

    def serve(self):
        for w in pool.waves(self.paths):
            if w.get("status") == "running":
                say(f"wave {w['wave']} was cut short by the last runner; running it again")
                self.run_wave(w)
        while not self.stopping:
            request = read_json(self.paths.go)
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
            write_json_atomic(self.paths.failure, failure)
            if getattr(w, "plan", None):
                w.plan.update(failure)
                write_json_atomic(self.paths.wave(w.plan["wave"]), w.plan)
        finally:
            lock.release()


class Wave:
    """One wave from plan to records: plan -> dispatch (measure, on the workers) -> decide -> record."""

    def __init__(self, runner, resumed, request):
        self.r, self.repo, self.paths = runner, runner.repo, runner.paths
        self.resumed, self.request = resumed, request
        self.notes = []
        self.plan = None
        self.contention = None

    def execute(self):
        records, config, runs, segment = research.load(self.repo, warn=say)
        if config is None:
            return
        if recovery.recover(self.repo, records, runs, segment, say):
            records, config, runs, segment = research.load(self.repo, warn=say)
        self.records, self.config, self.runs, self.segment = records, config, runs, segment
        self.rules = decide.Rules.from_config(config)
        best = decide.incumbent(runs)
        plan = self.resumed or self._plan(best)
        if self.resumed:   # from the start: the confirmation, if it had begun, is decided again
            plan["runs"] = plan["runs"][:plan.get("first_runs", len(plan["runs"]))]
        self.plan = plan
        os.makedirs(self.paths.waves_dir, exist_ok=True)
        write_json_atomic(self.paths.wave(plan["wave"]), plan)
        started = now_ms()
        results = self._dispatch(plan["runs"])
        if best is not None:
            results = self._check_contention(plan, results)
        recs = self._decide(plan, best, results)
        ended = now_ms()
        for rec in recs:
            rec.extra.update(wave_started=started, wave_ended=ended)
        self._record(plan, recs)
        plan.update(status="done", started=started, ended=ended, runs=[r.to_json() for r in recs],
                    notes=self.notes, contention=self.contention and self.contention.as_record())
        write_json_atomic(self.paths.wave(plan["wave"]), plan)
        say(f"wave {plan['wave']} done: " + ", ".join(f"run {x.run} {x.status}" for x in recs))

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
            if best is None:
                commit = gitops.head(root)
                scope_hash, lines = research.scope_fingerprint(self.repo, self.config.scope)
            else:
                commit = gitops.commit_of_run(root, best.run, best.commit)
                scope_hash, lines = best.scope_hash, best.scope_lines
            for i in range(count):
                role = "baseline" if best is None and i == 0 else "control"
                planned.append(dict(_slot(number + i, role, commit, best, None,
                                          self.request.get("description") or role, self.request.get("asi") or {},
                                          scope_hash, lines), calibration=True))
            return {"wave": wave_no, "status": "running", "parent": commit, "parent_run": best and best.run,
                    "runs": planned, "first_runs": len(planned), "candidates": [], "superseded": [],
                    "requested": self.request}
        parent = gitops.commit_of_run(root, best.run, best.commit) or gitops.head(root)
        planned.append(_slot(number, "control", parent, best, None, f"control: run {best.run}'s code", {},
                             best.scope_hash, best.scope_lines))
        superseded, taken = [], []
        for cand in queued:
            commit = gitops.git(root, "rev-parse", "--verify", "-q", f"{pool.CANDIDATES_REF}/{cand['id']}^{{commit}}",
                                check=False)
            why = _not_runnable(root, self.config, cand, commit)
            if why:
                superseded.append(cand["id"])
                pool.drop_candidate(self.paths, root, cand["id"])
                self.notes.append(f"candidate {cand['id']} was dropped, not run: {why}")
                continue
            if cand.get("parent") != parent:
                commit = _rebase(root, cand, parent)
                if commit is None:
                    superseded.append(cand["id"])
                    pool.drop_candidate(self.paths, root, cand["id"])
                    self.notes.append(f"candidate {cand['id']} no longer applies on run {best.run}'s code "
                                      "(conflict); it was dropped: write it again")
                    continue
                self.notes.append(f"candidate {cand['id']} was rebased onto run {best.run}")
            taken.append(cand["id"])
            planned.append(_slot(number + len(planned), "candidate", commit, best, cand["id"], cand["description"],
                                 cand.get("asi") or {}, cand["scope_hash"], cand.get("scope_lines")))
        return {"wave": wave_no, "status": "running", "parent": parent, "parent_run": best.run,
                "runs": planned, "first_runs": len(planned), "candidates": taken, "superseded": superseded,
                "requested": self.request}

    # --- dispatch and collect ---

    def _spec(self, slot):
        root = self.repo.root
        paths = list(self.config.scope) + sorted(self.config.fixed) + list(PROJECT_FILES)
        files, executable = _commit_files(root, slot["commit"], paths)
        return {"run": slot["run"], "commit": slot["commit"], "repo": root, "head_node": self.r.head_node,
                "files": files, "executable": executable, "config": self.config.to_json(),
                "ledger": self.r.ledger}

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
        self._take_starts()   # starts left from an earlier dispatch of the same run numbers
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
                    self.notes.append(f"run {run}: killed as its node went down; re-run (attempt {attempts[run]})")
                    submit(run)
                    continue
                res["attempt"] = attempts[run]
                self._store(run, res)
                results[run] = res
        self._note_restarts(results)
        lost = nodes_before - self._alive_nodes()
        if lost:
            self.notes.append(f"{len(lost)} node(s) lost during the wave; Ray ran their tasks again on the "
                              "nodes left (a run cut short by node loss is re-run, never recorded as a crash)")
        return results

    def _take_starts(self):
        """{run: [node, ...]}: where each run of this dispatch began, in order (the start ledger)."""
        ledger = self.r.ledger
        if ledger is None:
            return {}
        try:
            return self.r.ray.get(ledger.take.remote(), timeout=30)
        except Exception:   # the ledger is an account, never a reason to lose a wave
            return {}

    def _note_restarts(self, results):
        """Name each run that Ray began again elsewhere. Ray re-runs a task whose worker died
        without telling the caller, and its control store marks a killed node dead only after
        missed health checks (seconds, more on a loaded machine), often after the re-run has
        finished; the start ledger is what tells, at once, that a node was lost under a run."""
        for run, nodes in sorted(self._take_starts().items()):
            if len(nodes) < 2:
                continue
            end = (results.get(run) or {}).get("node") or nodes[-1]
            gone = [n for n in dict.fromkeys(nodes) if n != end]
            where = ", ".join(n[:8] for n in gone) or end[:8]
            self.notes.append(f"run {run}: began {len(nodes)} times; its worker or node ({where}) was lost "
                              f"under it and Ray ran it again on {end[:8]} (re-run, not a crash)")

    def _check_contention(self, plan, results):
        """The wave's results once its control's throughput matches the calibration's: a
        contended wave (wave.contention) runs again, up to CONTENTION_RERUNS times."""
        calibration = [r.metrics for r in self.runs if r.extra.get("calibration") and r.measured]
        control = next((s["run"] for s in plan["runs"] if s["role"] == "control"), None)
        for attempt in range(CONTENTION_RERUNS + 1):
            res = results.get(control)
            if res is None or res.get("error") or res.get("lost"):
                self.contention = None
                return results
            self.contention = wave.contention(res["measurement"].found, calibration)
            if self.contention is None or not self.contention.contended:
                return results
            if attempt == CONTENTION_RERUNS:
                self.notes.append(f"wave {plan['wave']} was contended again: {self.contention.describe()}; "
                                  "its decisions are not trusted, nothing is kept from it: submit its "
                                  "candidates again")
                return results
            self.notes.append(f"wave {plan['wave']} was contended: {self.contention.describe()}; its decisions "
                              "are not trusted: the wave runs again")
            say(self.notes[-1])
            results = self._dispatch(plan["runs"])
        return results

    def _alive_nodes(self):
        return {n["NodeID"] for n in self.r.ray.nodes() if n.get("Alive")}

    def _cut_by_node_loss(self, res):
        """A benchmark killed by a signal on a node that is gone now was cut short, not crashed.
        The kill can reach us before Ray's control store has noticed the node is gone (it
        notices by missed health checks, seconds later, later still on a loaded machine), so
        a signal death on a node still listed alive is looked at again for NODE_LOSS_GRACE_S."""
        code = res["measurement"].exit_code
        if not isinstance(code, int) or code >= 0:
            return False
        end = time.monotonic() + NODE_LOSS_GRACE_S
        while res.get("node") in self._alive_nodes():
            if time.monotonic() >= end or self.r.stopping:
                return False
            time.sleep(1.0)
        return True

    def _store(self, run, res):
        run_dir = self.repo.run_dir(run)
        shutil.rmtree(run_dir, ignore_errors=True)   # what an earlier attempt of this run left
        os.makedirs(run_dir, exist_ok=True)
        for name, data in (res.pop("files", None) or {}).items():
            path = os.path.join(run_dir, name)
            if os.path.realpath(path).startswith(os.path.realpath(run_dir) + os.sep):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
        res["measurement"].run_dir = os.path.abspath(run_dir)
        holdout.hide(self.repo, run, run_dir, res["measurement"], self.notes.append, confined=False)
        if res.get("left_behind"):
            self.notes.append(f"run {run}: files over the size limit stayed on the node: "
                              + ", ".join(res["left_behind"][:5]))

    # --- decide ---

    def _decide(self, plan, best, results):
        """The wave's records (log.Run), in run-number order; lost runs are left out (re-queued)."""
        recs = {}
        for slot in plan["runs"]:
            rec = self._judged(slot, results.get(slot["run"]), best)
            if rec is None:
                if slot.get("candidate") is not None:
                    self.notes.append(f"candidate {slot['candidate']}: its node was lost every time; it stays "
                                      "queued for the next wave")
                continue
            recs[slot["run"]] = rec
        if best is None:
            self._decide_calibration([r for r in recs.values()])
            return sorted(recs.values(), key=lambda r: r.run)
        controls = [r for r in recs.values() if r.extra["role"] == "control"]
        cands = [r for r in recs.values() if r.extra["role"] == "candidate"]
        measured = [c for c in controls if c.measured]
        prior_plus = list(self.runs) + measured
        stats = decide.noise(prior_plus, self.rules)
        th = wave.thresholds(len(cands), stats["sigma"] if stats["source"] == "repeats" else None, self.rules)
        if measured:
            ref_value, ref_run = measured[0].metric, measured[0].run
        else:   # no control measurement: compare with the incumbent's value, and say so
            ref_value, ref_run = decide.value_of(self.runs, best), None
            self.notes.append("the control gave no measurement; the candidates were compared with the "
                              "incumbent's value over its earlier measurements")
        decidable = [(r.run, r.metric) for r in cands if r.extra.pop("_decidable", False)]
        verdicts, winner = wave.decide_wave(decidable, ref_value, th, self.rules)
        if winner is not None and self.contention is not None and self.contention.contended:
            v = verdicts[winner]
            v.status, v.needs_confirmation = "discard", False
            v.reason = (f"wave winner not kept, the wave was contended ({self.contention.describe()}): its "
                        f"gain {wave._fmt(v.delta)} over the control is not trusted; submit it again")
            winner = None
        if winner is not None and verdicts[winner].needs_confirmation:
            recs.update(self._confirm(plan, recs[winner], verdicts[winner], th, best))
        best_value = decide.value_of(prior_plus, best)
        for r in cands:
            r.extra.update(control_run=ref_run, control_metric=ref_value, thresholds=th.as_record())
            v = verdicts.get(r.run)
            if v is None:
                continue
            r.status, r.reason, r.value, r.best_before, r.threshold = v.status, v.reason, r.metric, best_value, th.screen
            r.confidence = round(v.delta / th.sigma_d, 3) if th.sigma_d else None
            r.policy = "wave"
            r.extra.update(delta=v.delta, rank_in_wave=v.rank, runner_up=v.runner_up, **v.extra)
        for c in controls:
            if c.measured:
                c.reason = f"control of wave {plan['wave']}: {decide.remeasurement_reason(best.run)}"
                c.repeat_of = best.run
            c.best_before, c.threshold = best_value, th.screen
            c.extra.update(thresholds=th.as_record())
        rule = dict(decide.rule_record(self.rules, stats), candidates=len(cands))
        for r in recs.values():
            r.extra.pop("_decidable", None)
            r.rule = rule   # the wave's thresholds (extra["thresholds"]) come from these
        return sorted(recs.values(), key=lambda r: r.run)

    def _decide_calibration(self, recs):
        base = None
        for c in sorted(recs, key=lambda c: c.run):
            c.extra.pop("_decidable", None)
            if not c.measured and c.status not in ("keep", "discard"):
                continue
            if base is None:
                c.status, c.reason, c.value = "keep", "baseline: first measurement of the segment", c.metric
                base = c
            else:
                c.status, c.repeat_of = "discard", base.run
                c.reason = f"{decide.remeasurement_reason(base.run)} (calibration wave)"

    def _confirm(self, plan, winner, v, th, best):
        """The borderline winner again, beside a fresh control, right away (same wave number)."""
        number = max(s["run"] for s in plan["runs"]) + 1
        again = _slot(number, "confirm", winner.extra["_commit"], best, winner.extra.get("candidate"),
                      winner.description, winner.asi, winner.scope_hash, winner.scope_lines)
        again["repeat_of"] = winner.run
        ctrl = _slot(number + 1, "control", plan["parent"], best, None, f"control: run {best.run}'s code", {},
                     best.scope_hash, best.scope_lines)
        plan["runs"].extend([again, ctrl])
        write_json_atomic(self.paths.wave(plan["wave"]), plan)
        results = self._dispatch([again, ctrl])
        a = self._judged(again, results.get(number), best)
        c = self._judged(ctrl, results.get(number + 1), best)
        delta = decide.gain(self.rules.direction, c.metric, a.metric) if a and c and a.measured and c.measured \
            else None
        wave.settle_confirmation(v, delta, th, number)
        out = {}
        if a is not None:
            a.extra.pop("_decidable", None)
            if a.measured:
                a.status, a.repeat_of = "discard", winner.run
                a.reason = f"{decide.remeasurement_reason(winner.run)}: confirmation re-run of the wave winner"
                a.extra.update(delta=delta, control_run=number + 1, control_metric=c.metric if c else None)
            out[a.run] = a
        if c is not None:
            c.extra.pop("_decidable", None)
            if c.measured:
                c.reason = f"control of wave {plan['wave']}'s confirmation: {decide.remeasurement_reason(best.run)}"
                c.repeat_of = best.run
            out[c.run] = c
        return out

    # --- records ---

    def _judged(self, slot, res, best):
        """The run's log.Run, judged by the single-run steps (failure, diagnosis); None when lost.
        A measured run is marked `_decidable` for the wave's rule, which sets its final status."""
        if res is None or res.get("lost"):
            return None
        run = slot["run"]
        run_dir = self.repo.run_dir(run)
        os.makedirs(run_dir, exist_ok=True)
        extra = {"wave": self.plan["wave"], "role": slot["role"], "control": slot["role"] == "control",
                 "candidate": slot.get("candidate"), "attempt": res.get("attempt"),
                 "slot": {"node": res.get("node"), "host": res.get("host"),
                          "cuda_visible_devices": res.get("cuda_visible_devices"), "snapshot": res.get("snapshot")},
                 "gpu_s": round(res["bench_ended"] - res["bench_started"], 3) if res.get("bench_ended") else None,
                 "snapshot_s": res.get("snapshot_s"),
                 "bench_started": _ms(res.get("bench_started")), "bench_ended": _ms(res.get("bench_ended")),
                 "wave_gpus": self.r.info["gpus"] if self.r.info else None, "_commit": slot["commit"]}
        if slot.get("calibration"):
            extra["calibration"] = True
        if self.contention is not None:
            extra["contention"] = self.contention.as_record()
        template = log.Run(run=run, commit=gitops.short(slot["commit"]), description=slot["description"],
                           timestamp=now_ms(), segment=self.segment, asi=slot.get("asi") or {},
                           run_dir=self.repo.rel(run_dir), ref=f"{gitops.RUNS_REF}/{run}",
                           scope_hash=slot.get("scope_hash"), scope_lines=slot.get("scope_lines"),
                           repeat_of=slot.get("repeat_of"), policy="wave", sandbox=res.get("sandbox"), extra=extra)
        if res.get("error"):
            rec = template
            rec.status, rec.reason = "crash", f"the pool task failed: {res['error']}"
            return rec
        m = res["measurement"]
        with tempfile.TemporaryDirectory() as tmp:   # the run's own tree, for the diagnoser
            from autoresearch.isolation import snapshot
            tree = os.path.join(tmp, "tree")
            snapshot.export_commit(self.repo.root, slot["commit"], tree)
            v = verdict.judge(self.config, list(self.runs), m, template, tree, scope_lines=slot.get("scope_lines"))
        if res.get("tampered"):
            from autoresearch.store import integrity
            integrity.mark_tampered(v, res["tampered"], res.get("not_restored") or [])
        rec = v.record
        if v.decision is not None and not v.decision.implausible:
            rec.extra["_decidable"] = True
        return rec

    def _record(self, plan, recs):
        """Append the wave's records in run-number order, keep their refs, move HEAD on a keep."""
        root = self.repo.root
        kept = None
        for rec in recs:
            commit = rec.extra.pop("_commit")
            gitops.set_run_ref(root, rec.run, commit)
            try:
                with open(os.path.join(self.repo.run_dir(rec.run), "diff.patch"), "w", encoding="utf-8") as f:
                    f.write(gitops.diff_patch(root, commit))
            except (OSError, gitops.GitError):
                pass
            log.append(self.repo.log, rec, warn=say)
            if rec.status == "keep":
                kept = (rec, commit)
        if kept is not None and kept[0].extra["role"] == "candidate":
            self._move_head(kept[1])
        recorded = {r.extra.get("candidate") for r in recs}
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


def _slot(run, role, commit, best, cand_id, description, asi, scope_hash, scope_lines):
    return {"run": run, "role": role, "commit": commit, "candidate": cand_id, "description": description,
            "asi": asi, "scope_hash": scope_hash, "scope_lines": scope_lines,
            "repeat_of": best.run if best is not None and role == "control" else None}


def _not_runnable(root, config, cand, commit):
    """Why a candidate's commit must not run (it changed since submit, it touches files outside
    the scope, or a fixed file differs from init), or None. The ref could be moved after submit."""
    import hashlib
    if commit is None or commit != cand.get("commit"):
        return "its ref no longer points at the commit submit made; submit the change again"
    changed = gitops.changed_between(root, cand["parent"], commit)
    outside = [p for p in changed if not research.in_scope(p, config.scope)]
    if outside:
        return f"it changes files outside the scope ({', '.join(outside[:5])})"
    from autoresearch.isolation import snapshot
    files = snapshot.commit_files(root, commit, sorted(config.fixed))
    for name, digest in config.fixed.items():
        if name not in files or hashlib.sha256(files[name]).hexdigest() != digest:
            return f"its fixed file {name} differs from init"
    return None


def _rebase(root, cand, parent):
    """The candidate's change applied on `parent` (a 3-way merge of its scope diff), or None."""
    diff = gitops.git(root, "diff", *gitops.NO_DIFF_PROGRAMS, "--binary", cand["parent"], cand["commit"], check=False)
    if diff is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        def g(*args, input=None):
            p = subprocess.run(gitops.command(*args), cwd=root, env=gitops.environ(env), capture_output=True, text=True,
                               input=input)
            return p.stdout.strip() if p.returncode == 0 else None
        if g("read-tree", parent) is None or g("apply", "--cached", "--3way", input=diff + "\n") is None:
            return None
        tree = g("write-tree")
        ident = [] if gitops.has_identity(root) else gitops.FALLBACK_IDENTITY
        message = gitops.git(root, "log", "-1", "--format=%B", cand["commit"])
        commit = g(*ident, "commit-tree", tree, "-p", parent, "-m", message) if tree else None
    return commit


def _visible_gpus():
    from autoresearch.pool import pool_task
    return len(pool_task.probe(None)["gpus"])


def _commit_files(root, commit, paths):
    from autoresearch.isolation import snapshot
    listing = gitops.git(root, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths) or ""
    executable = [item.split("\t", 1)[1] for item in listing.split("\0") if item.startswith("100755 ")]
    return snapshot.commit_files(root, commit, paths), executable


def _ms(t):
    return int(t * 1000) if isinstance(t, (int, float)) else None


def _one_line(exc):
    return " ".join(str(exc).split())[-300:]


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# --- the Ray tasks (module-level functions, shipped by reference to autoresearch.pool.pool_task) ---

class _StartLedger:
    """Where each run began, told by the task itself: a run that began twice was re-run by Ray."""

    def __init__(self):
        self.starts = {}

    def began(self, run, node):
        self.starts.setdefault(run, []).append(node)

    def take(self):
        starts, self.starts = self.starts, {}
        return starts


def _start_ledger(ray, head_node):
    """The ledger actor, on the runner's own node (it lives as long as the pool); None if Ray refuses."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    try:
        return ray.remote(num_cpus=0)(_StartLedger).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(head_node, soft=False)).remote()
    except Exception as exc:
        say(f"no start ledger ({_one_line(exc)}); a run Ray re-ran after a lost node is noted only "
            "once Ray marks the node dead")
        return None


def _run_task(spec):
    import ray
    from autoresearch.pool import pool_task
    node = ray.get_runtime_context().get_node_id()
    ledger = spec.pop("ledger", None)
    if ledger is not None:
        try:
            ray.get(ledger.began.remote(spec["run"], node), timeout=30)
        except Exception:   # the account of starts never stops a run
            pass
    return pool_task.run_experiment(spec, node)


def _probe_task(data_check):
    from autoresearch.pool import pool_task
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
        info = read_json(paths.info) or {}
        if info.get("status") != "up":
            write_json_atomic(paths.info, {"status": "refused", "pid": os.getpid(),
                                                    "reason": "the pool runner failed to start; see "
                                                              f"{repo.rel(paths.log)}"})
    finally:
        try:
            if runner.ray is not None:
                runner.ray.shutdown()
        finally:
            info = read_json(paths.info) or {}
            if info.get("pid") == os.getpid() and info.get("status") == "up":
                _unlink(paths.info)
    return 0


if __name__ == "__main__":
    sys.exit(main())

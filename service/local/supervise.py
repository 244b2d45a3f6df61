"""`ragmon up` as a supervisor: a crashed process is restarted, not a reason to stop everything.

The API, the workers, Redis, the private PostgreSQL, Prometheus and Alertmanager are restarted with
exponential backoff, one printed line per restart (what exited, what it lost,
when it restarts), counted in
`ragmon_supervisor_restarts_total{process}`. A process that crashes `max_crashes` times
within `window_s` is given up on: `ragmon up` says so and stops. A worker that exits with
EXIT_EXTRA_MISSING (an optional extra it needs is not installed) is off: one line says why and
how to fix it, and it is neither restarted nor counted as a crash. The embedded
broker is never restarted: it is memory-only, so its death lost every topic
and offset; `ragmon up` says what was lost and stops.
"""

from __future__ import annotations

import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from service.contracts.extras import EXIT_EXTRA_MISSING
from service.local.embedded import ChildProcess, EmbeddedError, Stack
from service.local.metrics import SupervisorMetrics

DURABLE_KAFKA_SETTING = "RAGMON_KAFKA_BOOTSTRAP_SERVERS"

# What a restart of each kind of process loses; a crash is reported with it.
LOST = {
    "tansu": "every topic, every event accepted but not yet processed, and every consumer offset "
    f"(the embedded broker is memory-only; set {DURABLE_KAFKA_SETTING} to use a durable Kafka)",
    "redis": "dedupe keys (events redelivered later may be counted twice), feedback waiting for its trace, "
    "drift windows and rate-limit buckets (the embedded Redis keeps nothing on disk)",
    "api": "nothing accepted: the API answers 2xx only after the broker acknowledged; in-flight requests "
    "got an error and the app retries them",
    "worker": "nothing: the records it had not committed are redelivered and deduplicated by event id; "
    "its in-process counters restart from 0 (Prometheus rate() handles the reset)",
    "postgres": "nothing committed: the review queue, labels and outbox are on disk (its WAL is replayed at "
    "start); transactions in flight were rolled back and are retried (the sampler's batch, a "
    "reviewer's save)",
    "prometheus": "nothing on disk; alerts pending in memory restart their for: timers",
    "alertmanager": "silences and notification state kept in memory",
}


@dataclass(frozen=True)
class RestartPolicy:
    max_crashes: int = 5
    window_s: float = 600.0
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0


@dataclass
class _Watched:
    respawn: Callable[[], ChildProcess] | None  # None: never restarted (the memory-only broker)
    crashes: deque[float] = field(default_factory=deque)
    restart_at: float | None = None
    off: bool = False  # exited for want of an extra: not restarted, not watched again


class GiveUp(Exception):
    """A process cannot be kept running; the message says which and why."""


def respawn_same(child: ChildProcess, env: dict[str, str] | None) -> Callable[[], ChildProcess]:
    """Start the same command again, on the same port, appending to the same log."""

    def start() -> ChildProcess:
        out = open(child.log_path, "ab") if child.log_path else subprocess.DEVNULL  # noqa: SIM115 - the child's
        proc = subprocess.Popen(
            child.proc.args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        return ChildProcess(child.name, proc, child.port, child.log_path, child.extra)

    return start


def last_line(child: ChildProcess) -> str:
    """The last non-empty line of a child's log (where a worker says why it exited)."""
    if child.log_path is None:
        return ""
    try:
        with open(child.log_path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""


def _kind(name: str) -> str:
    return "worker" if name.startswith("worker") else name


class Supervisor:
    def __init__(
        self,
        stack: Stack,
        policy: RestartPolicy,
        metrics: SupervisorMetrics,
        say: Callable[[str], None] = lambda line: print(line, flush=True),
    ) -> None:
        self.stack = stack
        self.policy = policy
        self.metrics = metrics
        self.say = say
        self._watched: dict[str, _Watched] = {}
        # process -> why it is off or reduced (an extra it needs is not installed; no model): the status line
        self.off: dict[str, str] = {}

    def watch(
        self,
        child: ChildProcess,
        env: dict[str, str] | None,
        restart: bool = True,
        respawn: Callable[[], ChildProcess] | None = None,
    ) -> None:
        """Restart `child` when it dies: the same command (`respawn_same`), or `respawn` where a process
        needs more than that (PostgreSQL: its old backends killed, started as its own user)."""
        self._watched[child.name] = _Watched((respawn or respawn_same(child, env)) if restart else None)

    def check(self, now: float | None = None) -> None:
        """Restart what is due, notice what exited; raises GiveUp when the stack cannot go on."""
        now = time.monotonic() if now is None else now
        for i, child in enumerate(self.stack.children):
            watched = self._watched.get(child.name)
            if watched is None or watched.off:
                continue
            if watched.restart_at is not None:
                if now >= watched.restart_at:
                    self.stack.children[i] = self._restart(child, watched, now)
            elif not child.alive():
                self._crashed(child, watched, now)

    def _crashed(self, child: ChildProcess, watched: _Watched, now: float) -> None:
        p = self.policy
        code = child.proc.returncode
        if code == EXIT_EXTRA_MISSING and _kind(child.name) == "worker":
            watched.off = True
            why = last_line(child).split(": off: ", 1)[-1]  # the worker's line, less its "worker X: off: "
            self.off[child.name] = why or "an optional extra it needs is not installed"
            self.say(f"{child.name} exited with {code}, not a crash, not restarted: {self.off[child.name]}")
            return
        lost = LOST.get(_kind(child.name), "unknown")
        if watched.respawn is None:
            raise GiveUp(f"{child.name} exited with {code}: lost {lost}. Stopping; see {child.log_path}")
        watched.crashes.append(now)
        while watched.crashes and watched.crashes[0] < now - p.window_s:
            watched.crashes.popleft()
        n = len(watched.crashes)
        if n >= p.max_crashes:
            raise GiveUp(
                f"{child.name} crashed {n} times within {p.window_s:.0f}s (limit {p.max_crashes}): "
                f"giving up and stopping; see {child.log_path}"
            )
        delay = min(p.initial_backoff_s * 2 ** (n - 1), p.max_backoff_s)
        watched.restart_at = now + delay
        self.say(
            f"{child.name} exited with {code} (crash {n} of {p.max_crashes} allowed within "
            f"{p.window_s:.0f}s); lost: {lost}; restarting in {delay:.0f}s; see {child.log_path}"
        )

    def _restart(self, child: ChildProcess, watched: _Watched, now: float) -> ChildProcess:
        assert watched.respawn is not None
        watched.restart_at = None
        try:
            fresh = watched.respawn()  # announced by the one line printed when the crash was seen
        except EmbeddedError as exc:  # it could not start: a crash like any other, with its backoff
            self.say(f"{child.name} did not start again: {exc}")
            self._crashed(child, watched, now)
            return child
        self.metrics.restarts.labels(child.name).inc()
        return fresh

"""A private PostgreSQL for the review store, from the binaries in the `pgserver` wheel.

`ragmon up` and the tests start one in a directory of their own, on a free
port bound to 127.0.0.1, and stop it by PID. We drive the wheel's `initdb` and
`postgres` directly instead of pgserver's Python wrapper because the wrapper
owns the process lifetime (atexit hooks, shared servers per directory) and we
need a child we can stop by PID like every other embedded server.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg

from service.local.embedded import ChildProcess, EmbeddedError, free_port

# PostgreSQL refuses to run as root; as root we run it as this unprivileged user.
UNPRIVILEGED_USER = "nobody"


def postgres_bin_dir() -> Path:
    # find_spec, not import: importing pgserver starts its own machinery (platformdirs, locks).
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError("the pgserver package is missing: pip install pgserver")
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (found / "postgres").is_file():
        raise EmbeddedError(f"no postgres binary in {found}: reinstall pgserver")
    return found


def _run_as() -> str | None:
    return UNPRIVILEGED_USER if os.geteuid() == 0 else None


def _allow_traversal(directory: Path) -> None:
    """The unprivileged server must reach its cluster: add search (x, never read) permission for
    others on the directories above it that we own and that lack it (as pgserver does)."""
    for d in [directory, *directory.parents]:
        st = d.stat()
        if st.st_uid == os.geteuid() and not st.st_mode & 0o001:
            d.chmod(st.st_mode | 0o011)


def _init_cluster(data: Path, user: str | None) -> None:
    if (data / "PG_VERSION").is_file():
        return
    data.parent.mkdir(parents=True, exist_ok=True)
    data.mkdir(mode=0o700, exist_ok=True)
    if user is not None:
        _allow_traversal(data.parent)
        entry = pwd.getpwnam(user)
        shutil.chown(data, entry.pw_uid, entry.pw_gid)
    argv = [str(postgres_bin_dir() / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres",
            "--encoding=UTF8", "--no-sync"]
    done = subprocess.run(argv, capture_output=True, text=True, user=user, timeout=120, check=False)
    if done.returncode != 0:
        raise EmbeddedError(f"initdb failed ({done.returncode}): {done.stderr.strip()[-500:]}")


class PostgresProcess(ChildProcess):
    """Stopped with SIGINT, PostgreSQL's fast shutdown: SIGTERM would wait for every client to leave."""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def _wait_accepting(url: str, child: ChildProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not child.alive():
            raise EmbeddedError(f"postgres exited ({child.proc.returncode}); see {child.log_path}")
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            last = str(exc)
            time.sleep(0.1)
    raise EmbeddedError(f"postgres not accepting connections within {timeout:.0f}s: {last}")


def start_postgres(workdir: Path, port: int | None = None, log_dir: Path | None = None,
                   host: str = "127.0.0.1", durable: bool = True) -> PostgresProcess:
    """Start PostgreSQL 16 on host:port with its cluster in workdir/pgdata (created when missing).

    The child's `extra["url"]` is the connection URL of its `postgres` database.
    `durable=False` (tests) turns fsync off: faster, and nothing there must survive a power cut.
    """
    user = _run_as()
    if user is not None:
        _allow_traversal(postgres_bin_dir())  # the wheel's binaries may sit under a checkout only root may enter
    data = workdir.resolve() / "pgdata"
    _init_cluster(data, user)
    port = port or free_port(host)
    argv = [str(postgres_bin_dir() / "postgres"), "-D", str(data), "-p", str(port), "-k", str(data),
            "-c", f"listen_addresses={host}", "-c", "max_connections=200"]
    if not durable:
        argv += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    log_path = None
    out: int | object = subprocess.DEVNULL
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"postgres-{port}.log"
        out = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, user=user,  # type: ignore[arg-type]
                            start_new_session=True)
    url = f"postgresql://postgres@{host}:{port}/postgres"
    child = PostgresProcess("postgres", proc, port, log_path, {"url": url})
    try:
        _wait_accepting(url, child, 30)
    except EmbeddedError:
        child.stop()
        raise
    return child


def _kill_leftovers(old: ChildProcess, timeout: float = 10.0) -> None:
    """After the postmaster died (kill -9), its backends may live on holding the shared memory, and a new
    postmaster refuses to start beside them. They are in the postmaster's process group (started in a
    session of its own, whose group id is its pid): kill that group and wait until it is empty."""
    old.proc.poll()  # reap the postmaster itself: a zombie would keep its group "alive"
    pgid = old.proc.pid
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except PermissionError:  # not ours (the pid was reused): nothing of the old server is left
            return
        time.sleep(0.1)


def restart_postgres(old: ChildProcess, workdir: Path, log_dir: Path | None = None,
                     durable: bool = True) -> PostgresProcess:
    """The same cluster on the same port (the URL every process holds), after `old` died.

    PostgreSQL replays its WAL at start: every committed transaction is kept, the ones in flight were
    rolled back (their clients retry: the sampler's batch, a reviewer's save).
    """
    _kill_leftovers(old)
    return start_postgres(workdir, port=old.port, log_dir=log_dir, durable=durable)


def create_database(admin_url: str, name: str) -> str:
    """Create database `name` (if missing) next to admin_url's; return its URL."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return admin_url.rsplit("/", 1)[0] + "/" + name

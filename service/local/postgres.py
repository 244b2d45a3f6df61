"""A private PostgreSQL for the review store, from the binaries in the `pgserver` wheel.

`ragmon up` and the tests start one in a directory of their own and stop it
by PID. It is not reachable by any other local user: no TCP listener at all,
its Unix socket inside its data directory (mode 0700), password
authentication (scram-sha-256) for every connection, the passwords generated
into the workdir's secrets file (service/local/secrets.py, mode 0600). The
superuser `postgres` only creates the application role `rgm_app`
(no superuser, no CREATEDB/CREATEROLE) and its database `ragmon`; ragmon's
processes connect as that role (`extra["app_url"]`). We drive the wheel's `initdb` and
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
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from service.local.embedded import ChildProcess, EmbeddedError, free_port
from service.local.secrets import LocalSecrets, load_or_create_secrets

# PostgreSQL refuses to run as root; as root we run it as this unprivileged user.
UNPRIVILEGED_USER = "nobody"
APP_ROLE = "rgm_app"
APP_DATABASE = "ragmon"
# Every connection, over the one Unix socket there is, proves a password; no `trust`, no TCP.
HBA = "# written by ragmon (service/local/postgres.py) at every start\nlocal all all scram-sha-256\n"
HARDENED_MARKER = "ragmon-hardened"


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


def _init_cluster(data: Path, user: str | None, secrets: LocalSecrets) -> None:
    if (data / "PG_VERSION").is_file():
        return
    data.parent.mkdir(parents=True, exist_ok=True)
    data.mkdir(mode=0o700, exist_ok=True)
    if user is not None:
        _allow_traversal(data.parent)
        entry = pwd.getpwnam(user)
        shutil.chown(data, entry.pw_uid, entry.pw_gid)
    # The superuser's password from a file only the server's user can read (never on a command line).
    pwfile = data.parent / ".pg-superuser-password"
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.postgres_superuser_password + "\n")
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        argv = [
            str(postgres_bin_dir() / "initdb"),
            "-D",
            str(data),
            "--auth=scram-sha-256",
            "-U",
            "postgres",
            f"--pwfile={pwfile}",
            "--encoding=UTF8",
            "--no-sync",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, user=user, timeout=120, check=False)
    finally:
        pwfile.unlink(missing_ok=True)
    if done.returncode != 0:
        raise EmbeddedError(f"initdb failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    (data / HARDENED_MARKER).write_text("superuser password set from the workdir's secrets file\n")
    if user is not None:
        os.chown(data / HARDENED_MARKER, entry.pw_uid, entry.pw_gid)


def _harden(data: Path, user: str | None, secrets: LocalSecrets) -> None:
    """pg_hba.conf to password-only over the socket; the superuser's password set once (single-user mode,
    no server listening meanwhile), also for a cluster an older ragmon made with trust auth."""
    (data / "pg_hba.conf").write_text(HBA)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(data / "pg_hba.conf", entry.pw_uid, entry.pw_gid)
    if (data / HARDENED_MARKER).is_file():
        return
    # The password travels on stdin, never on a command line (argv is world-readable).
    statement = f"ALTER ROLE postgres WITH PASSWORD '{secrets.postgres_superuser_password}';\n"
    argv = [
        str(postgres_bin_dir() / "postgres"),
        "--single",
        "-D",
        str(data),
        "-c",
        "log_statement=none",
        "postgres",
    ]
    done = subprocess.run(
        argv, input=statement, capture_output=True, text=True, user=user, timeout=120, check=False
    )
    if done.returncode != 0:
        raise EmbeddedError(
            f"setting the PostgreSQL superuser password failed ({done.returncode}): "
            f"{done.stderr.strip()[-300:]}"
        )
    (data / HARDENED_MARKER).write_text("superuser password set from the workdir's secrets file\n")
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(data / HARDENED_MARKER, entry.pw_uid, entry.pw_gid)


def socket_url(socket_dir: Path, port: int, role: str, password: str, database: str) -> str:
    """A libpq URL over the Unix socket in `socket_dir` (no host name: nothing goes over TCP)."""
    return make_conninfo(
        "", user=role, password=password, dbname=database, host=str(socket_dir), port=str(port)
    )


def with_database(url: str, database: str) -> str:
    """The same server and credentials, another database (works for URLs and key=value strings alike)."""
    params = {k: v for k, v in conninfo_to_dict(url).items() if v is not None}
    params["dbname"] = database
    return make_conninfo("", **params)


def _ensure_app_role(admin_url: str, secrets: LocalSecrets) -> None:
    """The application's role (no superuser, no CREATEDB, no CREATEROLE) owning its own database."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(
            sql.SQL(
                "{} ROLE {} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                "NOBYPASSRLS PASSWORD {}"
            ).format(sql.SQL(verb), sql.Identifier(APP_ROLE), sql.Literal(secrets.postgres_app_password))
        )
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (APP_DATABASE,)).fetchone():
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(APP_DATABASE), sql.Identifier(APP_ROLE)
                )
            )
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE postgres FROM PUBLIC"))


class PostgresProcess(ChildProcess):
    """Stopped with SIGINT, PostgreSQL's fast shutdown: SIGTERM would wait for every client to leave."""

    stop_signal = signal.SIGINT


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


def start_postgres(
    workdir: Path, port: int | None = None, log_dir: Path | None = None, durable: bool = True
) -> PostgresProcess:
    """Start PostgreSQL 16 with its cluster in workdir/pgdata (created when missing), socket only.

    `extra["url"]` is the superuser's URL (the `postgres` database: tests create their databases
    with it), `extra["app_url"]` the application role's URL of database `ragmon`; both go over the
    socket in the data directory. `port` names the socket (.s.PGSQL.<port>); nothing listens on TCP.
    `durable=False` (tests) turns fsync off: faster, and nothing there must survive a power cut.
    """
    user = _run_as()
    if user is not None:
        _allow_traversal(
            postgres_bin_dir()
        )  # the wheel's binaries may sit under a checkout only root may enter
    secrets = load_or_create_secrets(workdir)
    data = workdir.resolve() / "pgdata"
    _init_cluster(data, user, secrets)
    _harden(data, user, secrets)
    port = port or free_port()
    argv = [
        str(postgres_bin_dir() / "postgres"),
        "-D",
        str(data),
        "-p",
        str(port),
        "-k",
        str(data),
        "-c",
        "listen_addresses=",
        "-c",
        "unix_socket_permissions=0700",
        "-c",
        "max_connections=200",
        "-c",
        "password_encryption=scram-sha-256",
    ]
    if not durable:
        argv += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    log_path = None
    out: int | object = subprocess.DEVNULL
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"postgres-{port}.log"
        out = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        argv,
        stdout=out,  # type: ignore[arg-type]
        stderr=subprocess.STDOUT,
        user=user,
        start_new_session=True,
    )
    admin = socket_url(data, port, "postgres", secrets.postgres_superuser_password, "postgres")
    app = socket_url(data, port, APP_ROLE, secrets.postgres_app_password, APP_DATABASE)
    child = PostgresProcess("postgres", proc, port, log_path, {"url": admin, "app_url": app})
    try:
        _wait_accepting(admin, child, 30)
        _ensure_app_role(admin, secrets)
    except (EmbeddedError, psycopg.Error) as exc:
        child.stop()
        raise EmbeddedError(f"postgres: {exc}") from exc
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


def restart_postgres(
    old: ChildProcess, workdir: Path, log_dir: Path | None = None, durable: bool = True
) -> PostgresProcess:
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
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_database(admin_url, name)

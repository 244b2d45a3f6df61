"""ragmon's rule file on VictoriaMetrics 1.79.5 (Debian's victoria-metrics): it loads in vmalert, and where
its query semantics differ from Prometheus' on ragmon's windowed counts, measured (docs/deploy.md
"VictoriaMetrics and vmalert" quotes these numbers).

The experiment writes the same known counter samples into a Prometheus (backfilled with promtool) and a
VictoriaMetrics (its import API), then asks both for `increase()` at the same instants: a steady counter
(+1 every 10 s, the scrape interval) and a fresh one (a tenant's first events: the series appears at 4).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from service.local.embedded import free_port, wait_for_port
from tests.support.leaks import stop_process
from tests.support.victoriametrics import (
    EXAMPLE,
    VmStack,
    binaries,
    example_args,
    start_victoria_metrics,
    start_vmalert,
    wait_http,
)

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "ragmon.rules.yml"
STEP = 10  # seconds between samples
T0 = (int(time.time()) // 3600 - 3) * 3600  # an hour three hours back: old enough for any latency offset
STEADY = [(T0 + STEP * k, float(k)) for k in range(61)]  # 0..60 over 600 s
FRESH = [(T0 + 300 + STEP * k, 4.0 + k) for k in range(31)]  # appears at 300 s with 4, +1 every 10 s
ONCE = [
    (T0 + 300 + STEP * k, 1.0) for k in range(31)
]  # one event, e.g. a (worker, reason)'s first dead letter


@pytest.mark.slow
def test_the_rule_file_loads_in_vmalert_with_its_templates() -> None:
    """`vmalert -dryRun` parses every expression (MetricsQL) and template (the triage `query` calls too)."""
    vmalert = binaries()["vmalert"]
    out = subprocess.run(
        [vmalert, f"-rule={RULES}", "-dryRun", "-rule.validateTemplates", "-rule.validateExpressions"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "fatal" not in out.stderr + out.stdout, out.stderr[-3000:]
    # and a broken expression is refused, so the check above can fail
    bad = {"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "sum(rate(x[5m]) by"}]}]}
    broken = subprocess.run(
        [vmalert, "-rule=/dev/stdin", "-dryRun"], input=yaml.safe_dump(bad), capture_output=True, text=True
    )
    assert broken.returncode != 0 and "bad prometheus expr" in broken.stderr + broken.stdout


def test_the_deploy_example_scrapes_every_job_the_prometheus_example_does() -> None:
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.compose.yml").read_text())
    agent = yaml.safe_load((EXAMPLE / "vmagent.yml").read_text())
    ours = [j for j in agent["scrape_configs"] if "ragmon" in j["job_name"]]
    assert ours == [j for j in prom["scrape_configs"] if "ragmon" in j["job_name"]]


@pytest.mark.slow
def test_the_deploy_example_loads_in_vmagent_and_its_flags_parse() -> None:
    found = binaries()
    scrape = subprocess.run(
        [found["vmagent"], f"-promscrape.config={EXAMPLE / 'vmagent.yml'}", "-dryRun"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert scrape.returncode == 0, scrape.stderr[-3000:]
    # every flag of the .args files is one the installed binaries know (an unknown flag is fatal)
    for name in ("victoria-metrics", "vmagent", "vmalert"):
        known = subprocess.run([found[name], "-help"], capture_output=True, text=True, timeout=60)
        for flag in example_args(name, **{k: "x" for k in PLACEHOLDERS}):
            option = re.escape(flag.split("=", 1)[0])
            assert re.search(rf"^\s+{option}(\s|$)", known.stderr + known.stdout, re.M), (name, flag)


PLACEHOLDERS = (
    "data",
    "listen",
    "latency_offset",
    "scrape_config",
    "vm",
    "rules",
    "alertmanager",
    "interval",
)


def _openmetrics(series: dict[str, list[tuple[int, float]]]) -> str:
    lines = []
    for name, samples in series.items():
        lines.append(f"# TYPE {name.removesuffix('_total')} counter")
        lines += [f"{name} {v} {t}" for t, v in samples]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, VmStack]]:
    prometheus = shutil.which("prometheus")
    promtool = shutil.which("promtool")
    if prometheus is None or promtool is None:
        pytest.skip("prometheus not installed (apt-get install prometheus)")
    work = tmp_path_factory.mktemp("vm-semantics")
    series = {"exp_steady_total": STEADY, "exp_fresh_total": FRESH, "exp_once_total": ONCE}
    source = work / "samples.om"
    source.write_text(_openmetrics(series))
    data = work / "prom-data"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)], check=True
    )
    (work / "prometheus.yml").write_text("global: {}\n")
    port = free_port()
    log = (work / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            prometheus,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=30d",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    vm = VmStack(work)
    try:
        wait_for_port("127.0.0.1", port, 30, proc)
        vm_url = start_victoria_metrics(vm)
        body = "\n".join(f"{n} {v} {t * 1000}" for n, s in series.items() for t, v in s) + "\n"
        httpx.post(vm_url + "/api/v1/import/prometheus", content=body, timeout=10).raise_for_status()
        httpx.get(vm_url + "/internal/force_flush", timeout=10).raise_for_status()
        prom_url = f"http://127.0.0.1:{port}"
        wait_http(prom_url + "/-/ready")
        yield prom_url, vm_url, vm
    finally:
        vm.stop()
        stop_process(proc)


def _value(base: str, expr: str, at: float, **extra: str) -> float | None:
    r = httpx.get(base + "/api/v1/query", params={"query": expr, "time": at, **extra}, timeout=10)
    r.raise_for_status()
    result = r.json()["data"]["result"]
    return round(float(result[0]["value"][1]), 3) if result else None


CASES = {  # (expression, seconds after T0) -> (Prometheus 2.42, VictoriaMetrics 1.79.5)
    # a steady counter: the same, Prometheus by extrapolating to the window's edges, VictoriaMetrics by
    # taking the last sample before the window as the base
    ("increase(exp_steady_total[1m])", 360): (6.0, 6.0),
    ("increase(exp_steady_total[1m])", 365): (6.0, 6.0),
    ("increase(exp_steady_total[30s])", 365): (3.0, 3.0),
    # a fresh counter: Prometheus never counts the events before the series' first sample (4 here),
    # VictoriaMetrics counts them when the first value is small against the growth that follows
    ("increase(exp_fresh_total[1m])", 300): (None, 4.0),
    ("increase(exp_fresh_total[1m])", 330): (3.5, 7.0),
    ("increase(exp_fresh_total[1m])", 350): (6.0, 9.0),
    # once the window starts at or after the first sample, both count the same
    ("increase(exp_fresh_total[1m])", 360): (6.0, 6.0),
    ("increase(exp_fresh_total[1m])", 370): (6.0, 6.0),
    # a series that appears at 1 and stays there (RagmonDeadLetters: increase(...[2m]) > 0)
    ("increase(exp_once_total[2m])", 330): (0.0, 1.0),
    ("increase(exp_once_total[2m])", 410): (0.0, 1.0),
    ("increase(exp_once_total[2m])", 420): (0.0, 0.0),
}


@pytest.mark.slow
def test_increase_differs_where_docs_say(stores: tuple[str, str, VmStack]) -> None:
    prom, vm, _ = stores
    measured = {
        (expr, offset): (_value(prom, expr, T0 + offset), _value(vm, expr, T0 + offset))
        for expr, offset in CASES
    }
    assert measured == CASES


@pytest.mark.slow
def test_vmalert_evaluates_latency_offset_seconds_in_the_past(stores: tuple[str, str, VmStack]) -> None:
    """A sample 10 s old is invisible to vmalert's evaluation (the 30 s default latency offset)."""
    _, vm, stack = stores
    now = time.time()
    body = f"exp_live 1 {int((now - 60) * 1000)}\nexp_live 2 {int((now - 10) * 1000)}\n"
    httpx.post(vm + "/api/v1/import/prometheus", content=body, timeout=10).raise_for_status()
    httpx.get(vm + "/internal/force_flush", timeout=10).raise_for_status()
    rules = stack.workdir / "live.rules.yml"
    rules.write_text(
        yaml.safe_dump({"groups": [{"name": "live", "rules": [{"record": "exp:live", "expr": "exp_live"}]}]})
    )
    start_vmalert(stack, rules, vm, "http://127.0.0.1:9", "1s")
    seen = None
    deadline = time.monotonic() + 15
    while seen is None and time.monotonic() < deadline:
        httpx.get(vm + "/internal/force_flush", timeout=10)
        seen = _value(vm, "exp:live", time.time(), nocache="1")
        time.sleep(0.5)
    assert time.time() - (now - 10) < 30, "too slow to tell: the newer sample left the offset window"
    assert seen == 1.0, (seen, stack.log("vmalert"))
    # the same instant query through the API: the offset applies, unless nocache=1 asks for raw data
    assert _value(vm, "exp_live", now) == 1.0
    assert _value(vm, "exp_live", now, nocache="1") == 2.0

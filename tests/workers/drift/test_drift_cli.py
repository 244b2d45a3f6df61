"""`ragmon drift ...` (python -m workers.drift.cli): calibrate, freeze, export, reset, status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import redis

from tests.workers.drift.drift_support import topic_queries
from workers.drift import cli
from workers.drift import encoder as encoder_module
from workers.drift.encoder import PinnedEncoder

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ragmon.yaml"
    path.write_text(
        "drift:\n  reference_size: 20\n  current_size: 20\n  min_current_size: 10\n"
        "  alpha: 0.05\n  permutations: 99\n  key_prefix: clitest\n"
    )
    monkeypatch.setenv("RAGMON_CONFIG", str(path))
    return path


def two_topics(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    normal = rng.standard_normal((120, 8)).astype(np.float32)
    new_topic = (rng.standard_normal((60, 8)) + 3.0).astype(np.float32)
    np.save(tmp_path / "normal.npy", normal)
    np.save(tmp_path / "new.npy", new_topic)
    return tmp_path / "normal.npy", tmp_path / "new.npy"


def test_calibrate_prints_the_table_and_writes_json(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    normal, new = two_topics(tmp_path)
    out = tmp_path / "cal.json"
    rc = cli.main(
        [
            "calibrate",
            "--reference",
            str(normal),
            "--ood",
            str(new),
            "--window",
            "20",
            "--repetitions",
            "20",
            "--seed",
            "1",
            "--json",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0
    assert "window 20 vs 20, alpha 0.05, 99 permutations" in printed
    assert "| 0% |" in printed and "| 50% |" in printed
    assert "smallest shift detected with 80% power at window 20" in printed
    report = json.loads(out.read_text())[0]
    assert [r["shift"] for r in report["rows"]] == [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert report["rows"][-1]["rate"] == 1.0


def test_calibrate_texts_with_the_pinned_encoder_and_a_held_out_topic(
    config_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    pinned_encoder: PinnedEncoder,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(encoder_module, "PinnedEncoder", lambda *a, **k: pinned_encoder)
    texts = tmp_path / "queries.txt"
    texts.write_text("\n".join(q for t in ("billing", "cooking", "devops") for q in topic_queries(t)[:20]))
    rc = cli.main(
        [
            "calibrate",
            "--reference",
            str(texts),
            "--window",
            "10",
            "--repetitions",
            "10",
            "--shifts",
            "0,0.5",
            "--seed",
            "2",
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "held-out farthest k-means topic of the reference" in printed


def test_calibrate_errors_name_the_input(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    normal, _ = two_topics(tmp_path)
    rc = cli.main(["calibrate", "--reference", str(normal), "--ood", str(normal), "--window", "100"])
    assert rc == 2
    assert (
        "reference: 120 in-distribution rows cannot fill two disjoint windows of 100"
        in capsys.readouterr().err
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n")
    assert cli.main(["calibrate", "--reference", str(bad)]) == 2
    assert "unknown format '.csv'" in capsys.readouterr().err


def test_freeze_export_status_and_reset(
    tmp_path: Path,
    config_file: Path,
    redis_url: str,
    redis_client: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    frozen = np.random.default_rng(1).standard_normal((25, 6)).astype(np.float32)
    sample = tmp_path / "last_week.jsonl"
    sample.write_text(
        "\n".join(json.dumps({"embedding": v.tolist(), "embedding_model": "emb-x"}) for v in frozen)
    )
    common = ["--tenant", "acme", "--signal", "app", "--redis-url", redis_url]
    assert cli.main(["freeze-reference", *common, "--file", str(sample)]) == 0
    assert "froze 25 queries as the reference of acme:app:all model emb-x (dim 6)" in capsys.readouterr().out
    assert cli.main(["status", "--redis-url", redis_url]) == 0
    assert "acme:app:all model=emb-x dim=6 reference=25 (frozen) current=0" in capsys.readouterr().out
    out = tmp_path / "ref.npy"
    assert (
        cli.main(
            [
                "export-window",
                *common,
                "--model",
                "emb-x",
                "--dim",
                "6",
                "--window",
                "reference",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    np.testing.assert_array_equal(np.load(out), frozen)
    assert cli.main(["reset-reference", *common, "--model", "emb-x", "--dim", "6"]) == 0
    assert "the next 20 queries become its reference" in capsys.readouterr().out
    assert redis_client.zcard("clitest:{acme:app:all:" + _model_id("emb-x", 6) + "}:ref") == 0


def _model_id(model: str, dim: int) -> str:
    from workers.drift.signals import SignalKey

    return SignalKey("acme", "app", "all", model, dim).model_id


def test_freeze_refuses_embeddings_for_the_encoder_signal(
    tmp_path: Path, config_file: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "e.npy", np.zeros((20, 384), dtype=np.float32))
    rc = cli.main(
        ["freeze-reference", "--tenant", "acme", "--redis-url", redis_url, "--file", str(tmp_path / "e.npy")]
    )
    assert rc == 2
    assert "the encoder signal is frozen from query texts" in capsys.readouterr().err


@pytest.mark.slow
def test_the_module_runs_as_a_subprocess(tmp_path: Path, config_file: Path) -> None:
    """The ragmon CLI starts it as `python -m workers.drift.cli` (service does not import workers)."""
    normal, new = two_topics(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workers.drift.cli",
            "calibrate",
            "--reference",
            str(normal),
            "--ood",
            str(new),
            "--window",
            "10",
            "--repetitions",
            "5",
            "--shifts",
            "0,0.5",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| 50% |" in done.stdout

"""`ragmon drift ...`: calibrate the alarm, pin a reference, inspect the windows.

Started by the ragmon CLI as `python -m workers.drift.cli ARGS` (the service
package does not import workers). Settings as for the worker: RAGMON_CONFIG
for the drift section, RAGMON_REDIS_URL for Redis (or --redis-url).

  calibrate         false alarm rate and power on injected shifts, from a sample file
  freeze-reference  replace a signal's reference with a file's queries (e.g. last week's traffic)
  export-window     save a signal's reference or current window to .npy (to freeze it later)
  reset-reference   drop a signal's windows: the next N queries become its reference
  status            list the signals with their windows and last result
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import redis

from service.contracts.config import ConfigError
from workers.drift.calibrate import DEFAULT_SHIFTS, calibrate, holdout_ood, render
from workers.drift.config import ALL_INTENTS, DriftConfig, load_drift_config
from workers.drift.encoder import EncoderUnavailable
from workers.drift.samples import Sample, SampleError, read_sample
from workers.drift.signals import APP, ENCODER, SIGNALS, SignalKey

if TYPE_CHECKING:
    from workers.drift.windows import WindowStore


MAX_FROZEN = 20_000  # the test is O(N²) in memory: 20k + 20k rows is a 13 GB kernel


class CliError(Exception):
    pass


def _embed(sample: Sample, config: DriftConfig) -> tuple[np.ndarray, str]:
    """(embeddings, model name): texts through the pinned encoder, embeddings as given."""
    if sample.embeddings is not None:
        return sample.embeddings, sample.model or "file"
    from workers.drift.encoder import PinnedEncoder

    encoder = PinnedEncoder(config.encoder.batch_size, config.encoder.device)
    assert sample.texts is not None
    return encoder.encode(sample.texts), encoder.name


def cmd_calibrate(args: argparse.Namespace, config: DriftConfig) -> int:
    rng = np.random.default_rng(args.seed)
    reference, ref_model = _embed(read_sample(args.reference), config)
    if args.ood is not None:
        ood, ood_model = _embed(read_sample(args.ood), config)
        if ood_model != ref_model or ood.shape[1] != reference.shape[1]:
            raise CliError(
                f"--ood embeddings ({ood_model}, dim {ood.shape[1]}) are not comparable with "
                f"--reference ({ref_model}, dim {reference.shape[1]})"
            )
        pool, source = reference, f"file {args.ood}"
    else:
        pool, ood = holdout_ood(reference, rng)
        source = f"held-out farthest k-means topic of the reference ({len(ood)} of {len(reference)} rows)"
    reports = []
    for window in args.window or [config.current_size]:
        report = calibrate(
            pool,
            ood,
            window=window,
            alpha=args.alpha or config.alpha,
            permutations=args.permutations or config.permutations,
            repetitions=args.repetitions,
            rng=rng,
            shifts=args.shifts,
            ood_source=source,
        )
        print(render(report), end="\n\n", flush=True)
        reports.append(report.as_dict())
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2))
    return 0


def _signal_key(args: argparse.Namespace, dim: int, model: str | None = None) -> SignalKey:
    if args.signal == ENCODER:
        from workers.drift.encoder import pinned_model_name

        model = pinned_model_name()
    elif not (args.model or model):
        raise CliError("--model is required for the app signal: the embedding_model the app sends")
    elif args.model and model and args.model != model:
        raise CliError(f"--model {args.model!r} differs from the file's embedding_model {model!r}")
    return SignalKey(args.tenant, args.signal, args.intent, str(args.model or model), dim)


def _store(args: argparse.Namespace, config: DriftConfig) -> WindowStore:
    from service.contracts.settings import CommonSettings
    from workers.drift.windows import WindowStore

    url = args.redis_url or CommonSettings().redis_url
    return WindowStore(
        redis.Redis.from_url(url), config.key_prefix, config.reference_size, config.current_size
    )


def cmd_freeze(args: argparse.Namespace, config: DriftConfig) -> int:
    sample = read_sample(args.file)
    if args.signal == ENCODER and sample.texts is None:
        raise CliError(
            "--file: the encoder signal is frozen from query texts (.txt or .jsonl with 'text'), "
            "so the pinned encoder embeds them; embeddings are for --signal app"
        )
    if args.signal == APP and sample.embeddings is None:
        raise CliError("--file: the app signal is frozen from embeddings (.npy or .jsonl with 'embedding')")
    vectors, model = _embed(sample, config)
    if not 10 <= len(vectors) <= MAX_FROZEN:
        raise CliError(f"--file: a frozen reference holds 10 to {MAX_FROZEN} queries, got {len(vectors)}")
    key = _signal_key(args, vectors.shape[1], None if model == "file" else model)
    count = _store(args, config).freeze(key, vectors, time.time())
    print(f"froze {count} queries as the reference of {key.stream} model {key.model} (dim {key.dim})")
    return 0


def cmd_export(args: argparse.Namespace, config: DriftConfig) -> int:
    key = _signal_key(args, args.dim)
    reference, current = _store(args, config).read(key)
    rows = reference if args.window == "reference" else current
    np.save(args.out, rows)
    print(f"wrote {len(rows)} {args.window} embeddings of {key.stream} model {key.model} to {args.out}")
    return 0


def cmd_reset(args: argparse.Namespace, config: DriftConfig) -> int:
    key = _signal_key(args, args.dim)
    _store(args, config).reset(key)
    print(
        f"reset {key.stream} model {key.model} (dim {key.dim}): the next {config.reference_size} queries "
        "become its reference"
    )
    return 0


def cmd_status(args: argparse.Namespace, config: DriftConfig) -> int:
    store = _store(args, config)
    signals = store.signals()
    keys = [k for k, _ in signals]
    for (key, seen), status, result in zip(signals, store.statuses(keys), store.results(keys), strict=True):
        tested = (
            f"MMD²={result['mmd2']:.5f} p={result['p_value']:.4f} drift={bool(result['drift'])}"
            if "mmd2" in result
            else "not tested yet"
        )
        print(
            f"{key.stream} model={key.model} dim={key.dim} reference={status.reference}"
            f"{' (frozen)' if status.frozen else ''} current={status.current} last_seen={seen:.0f} {tested}"
        )
    return 0


def _add_signal_args(p: argparse.ArgumentParser, with_dim: bool) -> None:
    p.add_argument("--tenant", required=True)
    p.add_argument("--signal", choices=SIGNALS, default=ENCODER)
    p.add_argument("--model", help="embedding_model of the app signal")
    p.add_argument("--intent", default=ALL_INTENTS)
    p.add_argument("--redis-url")
    if with_dim:
        p.add_argument("--dim", type=int, default=384, help="embedding dimension of the signal")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="ragmon drift", description=__doc__.splitlines()[0])
    sub = root.add_subparsers(dest="command", required=True)
    cal = sub.add_parser("calibrate", help="false alarm rate and power against injected shifts")
    cal.add_argument("--reference", required=True, help="sample of normal queries (.txt, .jsonl, .npy)")
    cal.add_argument("--ood", help="out-of-distribution queries; default: hold out a topic of the reference")
    cal.add_argument(
        "--window", type=int, action="append", help="window size (repeatable); default: current_size"
    )
    cal.add_argument("--alpha", type=float)
    cal.add_argument("--permutations", type=int)
    cal.add_argument("--repetitions", type=int, default=100)
    cal.add_argument(
        "--shifts", type=lambda s: [float(x) for x in s.split(",")], default=list(DEFAULT_SHIFTS)
    )
    cal.add_argument("--seed", type=int)
    cal.add_argument("--json", help="also write the tables as JSON here")
    freeze = sub.add_parser("freeze-reference", help="pin a signal's reference to a file of queries")
    _add_signal_args(freeze, with_dim=False)
    freeze.add_argument("--file", required=True)
    export = sub.add_parser("export-window", help="save a window's embeddings to .npy")
    _add_signal_args(export, with_dim=True)
    export.add_argument("--window", choices=("reference", "current"), default="current")
    export.add_argument("--out", required=True)
    reset = sub.add_parser("reset-reference", help="capture a new reference from the next queries")
    _add_signal_args(reset, with_dim=True)
    status = sub.add_parser("status", help="list signals, windows and last results")
    status.add_argument("--redis-url")
    return root


COMMANDS = {
    "calibrate": cmd_calibrate,
    "freeze-reference": cmd_freeze,
    "export-window": cmd_export,
    "reset-reference": cmd_reset,
    "status": cmd_status,
}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        config = load_drift_config()
        return COMMANDS[args.command](args, config)
    except (CliError, SampleError, ValueError, ConfigError, EncoderUnavailable) as exc:
        print(f"ragmon drift {args.command}: {exc}", file=sys.stderr)
        return 2
    except redis.exceptions.ConnectionError as exc:
        print(
            f"ragmon drift {args.command}: cannot reach Redis ({exc}); set RAGMON_REDIS_URL or --redis-url",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

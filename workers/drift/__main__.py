"""`python -m workers.drift`: the drift worker process (started by `ragmon worker drift`)."""

from __future__ import annotations

import sys
from typing import Any

from workers.drift.config import load_drift_config
from workers.drift.encoder import EncoderSlot
from workers.drift.processor import DriftProcessor


def build(ctx: Any) -> DriftProcessor:
    """The runtime's factory: ctx has .settings, .registry, .emitter and .redis.

    The drift worker emits nothing to Kafka: its results are windows and test
    outcomes in Redis and Prometheus metrics, so ctx.emitter is not used.
    """
    config = load_drift_config()
    slot = EncoderSlot(config.encoder.batch_size, config.encoder.device) if config.encoder.enabled else None
    processor = DriftProcessor(config, ctx.redis, ctx.registry, encoder=slot)
    processor.readiness()  # start loading the encoder now rather than on the first poll
    return processor


def main() -> None:
    # Imported here: the runtime is a separate package that the pure parts do not need.
    from workers.runtime.app import run_worker

    sys.exit(run_worker("drift", build))


if __name__ == "__main__":
    main()

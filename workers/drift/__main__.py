"""`python -m workers.drift`: the drift worker process (started by `ragmon worker drift`)."""

from __future__ import annotations

import logging
import sys
from typing import Any

from service.contracts.extras import DRIFT_ENCODER_MODULES, missing, missing_line
from workers.drift.config import DriftConfig, load_drift_config
from workers.drift.encoder import EncoderSlot
from workers.drift.processor import DriftProcessor


def build(ctx: Any) -> DriftProcessor:
    """The runtime's factory: ctx has .settings, .registry, .emitter and .redis.

    The drift worker emits nothing to Kafka: its results are windows and test
    outcomes in Redis and Prometheus metrics, so ctx.emitter is not used.
    """
    config = reduced_without_ml(load_drift_config())
    slot = EncoderSlot(config.encoder.batch_size, config.encoder.device) if config.encoder.enabled else None
    processor = DriftProcessor(config, ctx.redis, ctx.registry, encoder=slot)
    processor.readiness()  # start loading the encoder now rather than on the first poll
    return processor


def reduced_without_ml(config: DriftConfig) -> DriftConfig:
    """Without the `ml` extra the pinned encoder cannot load: drift runs on the app's embeddings alone
    (the reduced mode), says so once, and is ready, instead of waiting for an encoder for ever."""
    absent = missing(DRIFT_ENCODER_MODULES) if config.encoder.enabled else []
    if not absent:
        return config
    logging.getLogger("workers.drift").warning(
        "%s",
        missing_line(
            "worker drift",
            "ml",
            absent,
            "reduced (query drift on the app's embeddings only, no pinned-encoder signal)",
        ),
    )
    return config.model_copy(update={"encoder": config.encoder.model_copy(update={"enabled": False})})


def main() -> None:
    # Imported here: the runtime is a separate package that the pure parts do not need.
    from workers.runtime.app import run_worker

    sys.exit(run_worker("drift", build))


if __name__ == "__main__":
    main()

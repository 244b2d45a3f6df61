"""`ragmon worker drift` / `python -m workers.drift`: query and embedding drift (workers/runtime/contract.py)."""

from __future__ import annotations

import logging

from service.contracts.extras import DRIFT_ENCODER_MODULES, missing, missing_line
from service.contracts.scores import ImplicitSignalEvent, score_record
from workers.drift.config import DriftConfig
from workers.drift.encoder import EncoderSlot
from workers.drift.processor import DriftProcessor
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[DriftConfig]) -> DriftProcessor:
    """The drift worker's results are windows and test outcomes in Redis and Prometheus metrics; to Kafka
    it emits only the reformulations it finds, as implicit signals on the scores topic (the runtime
    waits for their acknowledgement before it commits the batch)."""
    config = reduced_without_ml(ctx.config)
    slot = EncoderSlot(config.encoder.batch_size, config.encoder.device) if config.encoder.enabled else None
    topic = ctx.settings.topics.scores

    def publish(signal: ImplicitSignalEvent) -> None:
        ctx.emitter.emit(topic, *score_record(signal))

    processor = DriftProcessor(config, ctx.redis, ctx.registry, encoder=slot, publish=publish)
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


WORKER = WorkerSpec("drift", build, DriftConfig)

if __name__ == "__main__":
    main_for(WORKER)

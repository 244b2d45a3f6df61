"""HTTP headers from a setting written as OTel's `OTEL_EXPORTER_OTLP_HEADERS`: `name=value,name=value`,
values percent-encoded (the forwarder's and the evaluations exporter's collector headers)."""

from __future__ import annotations

from urllib.parse import unquote

from service.contracts.config import ConfigError


def header_map(raw: str, setting: str) -> dict[str, str]:
    """The headers of `raw`; a part that is not `name=value` is a ConfigError naming `setting`."""
    out: dict[str, str] = {}
    for part in raw.split(","):
        if part.strip():
            name, sep, value = part.partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"{setting}: {part.split('=')[0].strip()!r} is not 'name=value'")
            out[name.strip()] = unquote(value.strip())
    return out

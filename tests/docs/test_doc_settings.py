"""Every RAGMON_* variable README.md and docs/architecture.md name is one the code reads.

Known variables: every field of the settings classes (imported; env_prefix +
field name, the way pydantic-settings reads them) and every `RAGMON_*` string
constant of service/ and workers/ (a variable read by hand, such as
RAGMON_CONFIG).
"""

from __future__ import annotations

import ast
import re

from pydantic_settings import BaseSettings

from service.api.settings import ApiSettings
from service.contracts.settings import CommonSettings
from tests.docs.markdown import ROOT
from workers.evaluations.settings import EvaluationsSettings
from workers.forwarder.settings import ForwarderSettings
from workers.phoenix.settings import PhoenixSettings
from workers.runtime.collector import CollectorSettings
from workers.runtime.settings import WorkerSettings

SETTINGS: tuple[type[BaseSettings], ...] = (
    CommonSettings,
    ApiSettings,
    WorkerSettings,
    ForwarderSettings,
    PhoenixSettings,
    EvaluationsSettings,
    CollectorSettings,  # the forwarder's and the exporter's shared fields; no prefix of its own
)
DOCUMENTS = ("README.md", "docs/architecture.md")
VARIABLE = re.compile(r"\bRAGMON_[A-Z0-9_]*[A-Z0-9]\b")


def _from_settings() -> set[str]:
    found = set()
    for cls in SETTINGS:
        prefix = str(cls.model_config.get("env_prefix", ""))
        found |= {f"{prefix}{name}".upper() for name in cls.model_fields}
    return found


def _from_constants() -> set[str]:
    found = set()
    for top in ("service", "workers"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found |= set(VARIABLE.findall(node.value))
    return found


def test_every_settings_class_is_checked() -> None:
    """A new pydantic-settings class in service/ or workers/ must join SETTINGS."""
    defined = set()
    for top in ("service", "workers"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text())
            defined |= {
                n.name
                for n in ast.walk(tree)
                if isinstance(n, ast.ClassDef) and any(ast.unparse(b).endswith("Settings") for b in n.bases)
            }
    assert defined == {cls.__name__ for cls in SETTINGS}


def test_every_variable_the_docs_name_is_read_by_the_code() -> None:
    known = _from_settings() | _from_constants()
    assert "RAGMON_WORKER_MAX_BATCH" in known and "RAGMON_CONFIG" in known, "the settings were read"
    named = {(doc, v) for doc in DOCUMENTS for v in VARIABLE.findall((ROOT / doc).read_text())}
    assert len(named) > 10
    assert sorted((doc, v) for doc, v in named if v not in known) == []

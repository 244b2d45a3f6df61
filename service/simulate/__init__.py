"""`ragmon simulate`: a deterministic traffic generator for a realistic RAG application.

Same scenario, seed and start time give a byte-identical event stream. The
manifest written at the end is the ground truth later tests compare the
workers' metrics with.
"""

from service.simulate.ledger import Ledger
from service.simulate.records import SimEvent
from service.simulate.run import run_generate, run_send, write_manifest
from service.simulate.scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from service.simulate.sender import SendConfig, send_anchor
from service.simulate.stream import generate_events

__all__ = [
    "Ledger",
    "Scenario",
    "ScenarioError",
    "SendConfig",
    "SimEvent",
    "generate_events",
    "load_scenario",
    "parse_scenario",
    "run_generate",
    "run_send",
    "send_anchor",
    "write_manifest",
]

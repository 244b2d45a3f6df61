"""Redaction time grows linearly with the text on adversarial shapes, one shape per pattern.

A client chooses the text; a pattern that backtracks quadratically lets one trace spend seconds
of the API's CPU. Each shape below is a run that a pattern can start on but never match. Linear
growth multiplies the time by 4 when the text grows 4x; quadratic growth by 16. The test fails
when the time for 4n characters is 8x that for n or more (8: the geometric middle, so noise of 2x
either way cannot flip the verdict). Each time is the fastest of several interleaved samples: a
busy machine only ever adds time, so the fastest is the one least disturbed.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable

import pytest

from service.api.redaction import Redactor

# Shape -> text of about n characters. Names say which pattern the shape is aimed at.
SHAPES: dict[str, Callable[[int], str]] = {
    "email_at_run": lambda n: "@" * n,
    "email_local_run_then_at": lambda n: "a" * (n - 1) + "@",
    "email_local_run_no_at": lambda n: "a" * n + " @",
    "email_dotted_local_run": lambda n: "a." * (n // 2) + "@",
    "email_label_run_after_at": lambda n: "a@" + "a." * (n // 2),
    "email_escaped_at_run": lambda n: "a" * (n - 6) + "\\u0040",
    "email_at_pairs": lambda n: "a@" * (n // 2),
    "digit_run": lambda n: "1" * n,
    "digit_space_run": lambda n: "1 " * (n // 2),
    "digit_dash_run": lambda n: "4-" * (n // 2),
    "digit_dot_run": lambda n: "1." * (n // 2),
    "digit_paren_run": lambda n: "1(" * (n // 2),
    "digits_then_separators": lambda n: "11111" + "(" * n,
    "dot_run": lambda n: "." * n,
    "ipv6_colon_run": lambda n: ":" * n,
    "ipv6_hex_colon_run": lambda n: "a:" * (n // 2),
    "ipv6_colon_then_hex": lambda n: ":" + "a" * n,
    "ipv6_spaced_candidates": lambda n: " a:b" * (n // 4),
    "mixed": lambda n: "a.1@b:2 " * (n // 8),
}

N = 16_384


def _fastest_time(redactor: Redactor, text: str, repeat: int) -> float:
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            redactor.redact(text, Counter())
        samples.append((time.perf_counter() - started) / repeat)
    return min(samples)


def growth(shape: Callable[[int], str], n: int = N) -> float:
    """t(4 * n/2) / t(n/2): the fastest samples of interleaved rounds, the median of three rounds."""
    redactor = Redactor()
    small, large = shape(n // 2), shape(2 * n)
    once = _fastest_time(redactor, small, 1)
    repeat = max(1, int(0.002 / max(once, 1e-7)))  # a sample of at least ~2 ms: timer noise stays small
    ratios = []
    for _ in range(3):
        ratios.append(_fastest_time(redactor, large, repeat) / _fastest_time(redactor, small, repeat))
    return statistics.median(ratios)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_redaction_time_grows_linearly(name: str) -> None:
    ratio = growth(SHAPES[name])
    assert ratio < 8.0, f"{name}: 4x the text multiplied the time by {ratio:.2f} (linear: 4, quadratic: 16)"


def test_the_shapes_are_long_runs_of_one_document() -> None:
    from service.contracts.vocabulary import MAX_DOCUMENT_CHARS

    # 2N is the document limit: the shapes are what one document may hold.
    assert 2 * N == MAX_DOCUMENT_CHARS
    for name, shape in SHAPES.items():
        assert N * 0.99 <= len(shape(N)) <= N + 8, name

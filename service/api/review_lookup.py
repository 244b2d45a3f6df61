"""Gold a reviewer adds by id, and its title and text from the app's lookup URL (docs/review.md).

Recall needs misses: a gold document the system never retrieved can only be named by the reviewer.
The label form takes such ids (`added_gold_ids`: separated by commas, spaces or lines); they join the
label's gold ids. When `RAGMON_REVIEW_DOCUMENT_URL` is set (`https://app.example/docs/{id}`), the
page fetches each added id there (GET, JSON `{"title": ..., "text": ...}`, 2 s, 256 KiB) so the
reviewer sees that the id names the document meant; a failed lookup is shown as such, never fatal.
What comes back is redacted like the rest of the page's text and cut to the contract's bounds.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from service.api.redaction import Redactor
from service.contracts import vocabulary as L

ID = re.compile(L.ID_PATTERN)
SEPARATORS = re.compile(r"[\s,]+")
LOOKUP_TIMEOUT_S = 2.0
LOOKUP_MAX_BYTES = 256 * 1024
TITLE_MAX_CHARS = 300


class AddedGoldError(ValueError):
    """The field's value breaks a rule; the message names the field and the rule."""


def parse_added_gold(text: str) -> list[str]:
    ids = [part for part in SEPARATORS.split(text.strip()) if part]
    for doc_id in ids:
        if len(doc_id) > L.MAX_ID_LEN or not ID.match(doc_id):
            raise AddedGoldError(
                f"added_gold_ids: {doc_id[:40]!r} is not a document id ({L.MAX_ID_LEN} characters at most, "
                f"of letters, digits and {L.ID_CHARS[9:]})"
            )
    return list(dict.fromkeys(ids))


def check_url_template(template: str) -> str:
    if not template.startswith(("http://", "https://")) or "{id}" not in template:
        raise ValueError("must be an http(s) URL containing {id}, e.g. https://app.example/docs/{id}")
    return template


async def _lookup_one(client: httpx.AsyncClient, template: str, doc_id: str) -> dict[str, Any]:
    url = template.replace("{id}", quote(doc_id, safe=""))
    try:
        async with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code != 200:
                return {"problem": f"the lookup answered {response.status_code}"}
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > LOOKUP_MAX_BYTES:
                    return {"problem": f"the lookup's answer is over {LOOKUP_MAX_BYTES} bytes"}
        doc = orjson.loads(body)
    except (httpx.HTTPError, orjson.JSONDecodeError) as exc:
        return {"problem": f"lookup failed: {type(exc).__name__}"}
    if not isinstance(doc, dict):
        return {"problem": "the lookup's answer is not a JSON object"}
    title, text = doc.get("title"), doc.get("text")
    return {
        "title": title[:TITLE_MAX_CHARS] if isinstance(title, str) else None,
        "text": text[: L.MAX_DOCUMENT_CHARS] if isinstance(text, str) else None,
    }


async def lookup_added(
    template: str | None, ids: Sequence[str], redactor: Redactor | None
) -> list[dict[str, Any]]:
    """One entry per added id: id, title, text (None when unknown) and problem (None when fine)."""
    if not ids:
        return []
    if template is None:
        return [{"id": i, "title": None, "text": None, "problem": None} for i in ids]
    async with httpx.AsyncClient(timeout=LOOKUP_TIMEOUT_S, follow_redirects=False) as client:
        found = await asyncio.gather(*(_lookup_one(client, template, i) for i in ids))
    out = []
    for doc_id, doc in zip(ids, found, strict=True):
        entry = {"id": doc_id, "title": None, "text": None, "problem": None} | doc
        if redactor is not None:
            for key in ("title", "text"):
                if entry[key]:
                    entry[key] = redactor.redact(entry[key], Counter())
        out.append(entry)
    return out

"""The review page (/review): server-rendered forms for labelling queued traces (docs/review.md).

Reviewers sign in with a key that has the `review` scope (or send it as a
Bearer header); ingest keys get 403 here, and review keys get 403 on
/v1/events. Every POST checks a CSRF token; every page is escaped by Jinja2
and sent with a Content-Security-Policy that runs only our own script.
Automated scores, stratum and queue reason are rendered only after the
reviewer saved a label for the item (blind review).
"""

from __future__ import annotations

import asyncio
import functools
import html
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec
from urllib.parse import parse_qsl, urlsplit

import psycopg
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.datastructures import FormData, UploadFile

from service.api.auth import AuthError
from service.api.review_auth import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    Reviewer,
    reviewer_name,
    usable_browser_token,
)
from service.api.review_lookup import AddedGoldError, lookup_added, parse_added_gold
from service.api.review_state import STATIC, LoginThrottled, ReviewService, SessionStoreDown
from service.api.state import STATE_KEY, ApiState
from service.contracts import vocabulary as L
from service.review.reports import all_reports, signals_report, store_reports
from service.review.store import ForeignItem, LabelInput, NotAssigned

router = APIRouter(prefix="/review", include_in_schema=False)
log = logging.getLogger("ragmon.api.review")
P = ParamSpec("P")
REASONS = (
    "",
    "unsupported_claim",
    "contradicts_context",
    "missing_context",
    "wrong_documents",
    "incomplete",
    "refusal_wrong",
    "other",
)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
# Bounds on what a form post may be, checked before a byte of it is parsed (the sign-in form is unauthenticated).
LOGIN_FORM_MAX_BYTES = 2048
LOGIN_FORM_MAX_FIELDS = 4
# A label form: a note of MAX_NOTE_CHARS (up to 12 bytes each once percent-encoded) and one gold id per document.
# Gold the reviewer adds by id: up to MAX_GOLD_IDS ids in one field.
LABEL_FORM_MAX_BYTES = (
    12 * L.MAX_NOTE_CHARS
    + 2 * L.MAX_DOCUMENTS * (3 * L.MAX_ID_LEN + 16)
    + L.MAX_GOLD_IDS * (3 * L.MAX_ID_LEN + 3)
    + 1024
)
LABEL_FORM_MAX_FIELDS = 2 * L.MAX_DOCUMENTS + 9
SMALL_FORM_MAX_BYTES = 1024  # logout: the CSRF token only
SMALL_FORM_MAX_FIELDS = 4


class PageError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _service(request: Request) -> ReviewService:
    state: ApiState = getattr(request.state, STATE_KEY)
    review = state.review
    if review is None or review.store is None:
        raise PageError(
            503, "the review page is off: set RAGMON_DATABASE_URL to a PostgreSQL (ragmon up starts one)"
        )
    return review


async def _reviewer(request: Request, review: ReviewService) -> Reviewer | None:
    """The Bearer key's reviewer, or the session cookie's while its key stands and it was not signed out."""
    header = request.headers.get("authorization")
    if header:
        state: ApiState = getattr(request.state, STATE_KEY)
        try:
            principal = state.keys.authenticate(header, scope="review")
        except AuthError as exc:
            raise PageError(exc.status, exc.message) from exc
        return Reviewer(principal.tenant, reviewer_name(principal.name), False, principal.key_id)
    session = review.signer.verify(request.cookies.get(SESSION_COOKIE))
    if session is None or not review.key_still_valid(session):
        return None
    try:
        if await review.revoked(session):
            return None
    except SessionStoreDown as exc:
        raise PageError(
            503, "the session store (Redis) is unreachable; try again shortly", {"Retry-After": "2"}
        ) from exc
    return session


def _render(
    request: Request,
    review: ReviewService,
    template: str,
    status: int = 200,
    reviewer: Reviewer | None = None,
    **context: Any,
) -> HTMLResponse:
    browser = usable_browser_token(request.cookies.get(CSRF_COOKIE)) or review.signer.new_browser_token()
    headers = {**SECURITY_HEADERS, **context.pop("headers", {})}
    html = review.templates.get_template(template).render(
        reviewer=reviewer, csrf=review.signer.csrf_token(browser), error=context.pop("error", None), **context
    )
    response = HTMLResponse(html, status_code=status, headers=headers)
    if request.cookies.get(CSRF_COOKIE) != browser:
        response.set_cookie(
            CSRF_COOKIE, browser, httponly=True, samesite="strict", path="/review", secure=_https(request)
        )
    return response


def _https(request: Request) -> bool:
    """Cookies are Secure whenever the reviewer's browser talks HTTPS (directly or through a proxy)."""
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


def _error_page(request: Request, exc: PageError) -> Response:
    try:
        review = _service(request)
    except PageError:
        return HTMLResponse(
            f"<p>{html.escape(exc.message)}</p>",
            status_code=exc.status,
            headers={**SECURITY_HEADERS, **exc.headers},
        )
    return _render(request, review, "review/base.html", exc.status, error=exc.message, headers=exc.headers)


async def read_form(request: Request, max_bytes: int, max_fields: int) -> FormData:
    """An urlencoded form of at most `max_bytes` and `max_fields`, refused before parsing when it is not.

    Starlette's request.form() would read a form of any size, and spool multipart files, before any
    check of ours; here the media type and the size are checked first and the body is read with a cap.
    """
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if (
        media == ""
        and request.headers.get("content-length") in (None, "0")
        and "transfer-encoding" not in request.headers
    ):
        return FormData()  # an empty post: no fields (the CSRF check then refuses it)
    if media != "application/x-www-form-urlencoded":
        raise PageError(
            415, "Content-Type: forms here are application/x-www-form-urlencoded (no multipart, no files)"
        )
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
        raise PageError(413, f"form: at most {max_bytes} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise PageError(413, f"form: at most {max_bytes} bytes")
    try:
        text = body.decode("ascii")  # urlencoded forms are ASCII; anything else is percent-encoded
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=max_fields, errors="strict")
    except UnicodeDecodeError as exc:
        raise PageError(
            400,
            "form: not application/x-www-form-urlencoded (raw non-ASCII bytes or a "
            "percent-escape that is not UTF-8)",
        ) from exc
    except ValueError as exc:
        raise PageError(413, f"form: at most {max_fields} fields") from exc
    fields: list[tuple[str, str | UploadFile]] = list(pairs)
    return FormData(fields)


async def _checked_form(
    request: Request,
    review: ReviewService,
    reviewer: Reviewer | None,
    max_bytes: int = SMALL_FORM_MAX_BYTES,
    max_fields: int = SMALL_FORM_MAX_FIELDS,
) -> FormData:
    """The posted form, after the CSRF check (skipped only for Bearer-key clients, which no browser sends)."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host"):
        raise PageError(403, "cross-origin form post refused (csrf): Origin is not this host")
    form = await read_form(request, max_bytes, max_fields)
    if reviewer is not None and not reviewer.via_cookie:
        return form
    token = form.get("csrf_token")
    if not review.signer.csrf_ok(request.cookies.get(CSRF_COOKIE), token if isinstance(token, str) else None):
        raise PageError(403, "csrf_token: missing or invalid; reload the page and submit again (csrf)")
    return form


async def _signed_in(request: Request) -> tuple[ReviewService, Reviewer]:
    review = _service(request)
    reviewer = await _reviewer(request, review)
    if reviewer is None:
        raise PageError(401, "sign in at /review with a review key")
    return review, reviewer


async def _login_allowed(review: ReviewService, address: str) -> None:
    try:
        await review.check_login_allowed(address)
    except LoginThrottled as exc:
        raise PageError(
            429,
            f"too many failed sign-ins from {address}; try again in {exc.retry_after_s} s",
            {"Retry-After": str(exc.retry_after_s)},
        ) from exc
    except SessionStoreDown as exc:
        raise PageError(
            503, "the session store (Redis) is unreachable; try again shortly", {"Retry-After": "2"}
        ) from exc


async def _login_failed(review: ReviewService, address: str) -> None:
    try:
        await review.login_failed(address)
    except SessionStoreDown as exc:
        raise PageError(
            503, "the session store (Redis) is unreachable; try again shortly", {"Retry-After": "2"}
        ) from exc


def _page(handler: Callable[P, Awaitable[Response]]) -> Callable[P, Awaitable[Response]]:
    """A page's handler whose PageError is answered with the error page (the handler's `request` renders it)."""

    @functools.wraps(handler)
    async def answer(*args: P.args, **kwargs: P.kwargs) -> Response:
        request = kwargs["request"]
        assert isinstance(request, Request)
        try:
            return await handler(*args, **kwargs)
        except PageError as exc:
            return _error_page(request, exc)
        except psycopg.OperationalError as exc:  # PoolTimeout included: PostgreSQL down or unreachable
            return _error_page(request, _store_down(request, exc))

    return answer


def _store_down(request: Request, exc: psycopg.OperationalError) -> PageError:
    """The review store is unreachable: a 503 with Retry-After, not a 500; the pool
    reconnects by itself when PostgreSQL is back (docs/architecture.md "Delivery semantics")."""
    log.warning("review store unreachable, answering 503: %s", exc)
    state: ApiState = getattr(request.state, STATE_KEY)
    return PageError(
        503,
        "the review store (PostgreSQL) is unreachable; try again shortly",
        {"Retry-After": str(state.settings.retry_after_s)},
    )


@router.get("/static/review.js")
async def script() -> FileResponse:
    return FileResponse(STATIC / "review.js", media_type="text/javascript", headers=SECURITY_HEADERS)


@router.get("", response_class=HTMLResponse)
@_page
async def index(request: Request) -> Response:
    review = _service(request)
    reviewer = await _reviewer(request, review)
    if reviewer is None:
        return _render(request, review, "review/login.html")
    assert review.store is not None
    progress = await asyncio.to_thread(review.store.progress, reviewer.tenant, reviewer.name)
    reviewers = await asyncio.to_thread(review.store.reviewers, reviewer.tenant)
    return _render(
        request, review, "review/index.html", reviewer=reviewer, progress=progress, reviewers=reviewers
    )


@router.post("/login")
@_page
async def login(request: Request) -> Response:
    review = _service(request)
    address = request.client.host if request.client else "unknown"
    await _login_allowed(review, address)
    form = await _checked_form(request, review, None, LOGIN_FORM_MAX_BYTES, LOGIN_FORM_MAX_FIELDS)
    key = form.get("key")
    state: ApiState = getattr(request.state, STATE_KEY)
    try:
        principal = state.keys.authenticate(
            f"Bearer {key}" if isinstance(key, str) and key else None, scope="review"
        )
    except AuthError as exc:
        await _login_failed(review, address)
        raise PageError(exc.status, exc.message) from exc
    response = RedirectResponse("/review", status_code=303)
    cookie = review.signer.issue(principal.tenant, reviewer_name(principal.name), principal.key_id)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=review.settings.review_session_s,
        httponly=True,
        samesite="strict",
        path="/review",
        secure=_https(request),
    )
    return response


@router.post("/logout")
@_page
async def logout(request: Request) -> Response:
    review, reviewer = await _signed_in(request)
    await _checked_form(request, review, reviewer)
    if reviewer.via_cookie:  # the cookie is dead everywhere from now on, not only in this browser
        try:
            await review.revoke(reviewer, time.time())
        except SessionStoreDown as exc:
            raise PageError(
                503,
                "the session store (Redis) is unreachable: not signed out; try again",
                {"Retry-After": "2"},
            ) from exc
    response = RedirectResponse("/review", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/review")
    return response


@router.get("/next")
@_page
async def next_item(request: Request) -> Response:
    review, reviewer = await _signed_in(request)
    assert review.store is not None
    item_id = await asyncio.to_thread(review.store.next_item, reviewer.tenant, reviewer.name)
    if item_id is None:
        progress = await asyncio.to_thread(review.store.progress, reviewer.tenant, reviewer.name)
        return _render(request, review, "review/empty.html", reviewer=reviewer, progress=progress)
    return RedirectResponse(f"/review/items/{item_id}", status_code=303)


def _documents(content: dict[str, Any]) -> list[dict[str, Any]]:
    """Context documents in prompt order, then exclusion candidates not in the context (ids only)."""
    docs = [dict(d) for d in content.get("documents", [])]
    seen = {d["id"] for d in docs}
    docs += [
        {"id": c["id"], "text": None, "score": c.get("score")}
        for c in content.get("candidates", [])
        if c["id"] not in seen
    ]
    return docs


async def _load_item(review: ReviewService, reviewer: Reviewer, item_id: int) -> dict[str, Any]:
    assert review.store is not None
    try:
        item = await asyncio.to_thread(review.store.item, item_id, reviewer.tenant, reviewer.name)
    except ForeignItem:
        item = None  # another tenant's item is answered exactly like a missing one: ids tell nothing
    if item is None:
        raise PageError(404, f"no review item {item_id}")
    return item


@router.get("/items/{item_id}", response_class=HTMLResponse)
@_page
async def show_item(request: Request, item_id: int) -> Response:
    review, reviewer = await _signed_in(request)
    item = await _load_item(review, reviewer, item_id)
    assert review.store is not None
    progress = await asyncio.to_thread(review.store.progress, reviewer.tenant, reviewer.name)
    mine = item["my_label"]
    documents = _documents(item["content"])
    shown = {d["id"] for d in documents}
    added_ids = [g for g in (mine["gold_ids"] if mine else []) if g not in shown]
    added = await lookup_added(review.settings.review_document_url, added_ids, review.redactor)
    return _render(
        request,
        review,
        "review/item.html",
        reviewer=reviewer,
        item=item,
        mine=mine,
        revealed=mine is not None,
        documents=documents,
        gold=set(mine["gold_ids"]) if mine else set(),
        added=added,
        reasons=REASONS,
        progress=progress,
        max_note=L.MAX_NOTE_CHARS,
    )


def parse_label(form: FormData, allowed_docs: set[str], review: ReviewService) -> LabelInput:
    """The label form, checked; a 422 names the field and the rule."""
    faithful = form.get("faithful")
    if faithful not in ("yes", "no"):
        raise PageError(422, "faithful: choose yes or no (required)")
    answerable = form.get("answerable") or ""
    if answerable not in ("yes", "no", ""):
        raise PageError(422, "answerable: yes, no or empty")
    gold = [g for g in form.getlist("gold_ids") if isinstance(g, str)]
    unknown = sorted(set(gold) - allowed_docs)
    if unknown:
        raise PageError(422, f"gold_ids: {unknown[:3]} are not documents of this item")
    added = form.get("added_gold_ids") or ""
    try:
        gold += parse_added_gold(added if isinstance(added, str) else "")
    except AddedGoldError as exc:
        raise PageError(422, str(exc)) from None
    if len(set(gold)) > L.MAX_GOLD_IDS:
        raise PageError(422, f"gold_ids and added_gold_ids: at most {L.MAX_GOLD_IDS} gold documents")
    reason = form.get("reason") or ""
    if reason not in REASONS:
        raise PageError(422, f"reason: one of {[r for r in REASONS if r]} or empty")
    note = form.get("note") or ""
    if not isinstance(note, str) or len(note) > L.MAX_NOTE_CHARS:
        raise PageError(422, f"note: at most {L.MAX_NOTE_CHARS} characters")
    if "\x00" in note:  # PostgreSQL text cannot hold it: the save raised, a 500
        raise PageError(422, "note: the NUL character (%00, U+0000) cannot be stored (no_nul)")
    if note and review.redactor is not None:  # what reviewers type joins the golden set: no PII there either
        note = review.redactor.redact(note, Counter())
    return LabelInput(
        faithful == "yes",
        None if not answerable else answerable == "yes",
        list(dict.fromkeys(gold)),
        reason or None,
        note.strip() or None,
    )


@router.post("/items/{item_id}/label")
@_page
async def save_label(request: Request, item_id: int) -> Response:
    review, reviewer = await _signed_in(request)
    form = await _checked_form(request, review, reviewer, LABEL_FORM_MAX_BYTES, LABEL_FORM_MAX_FIELDS)
    item = await _load_item(review, reviewer, item_id)
    label = parse_label(form, {d["id"] for d in _documents(item["content"])}, review)
    assert review.store is not None and review.relay is not None
    try:
        await asyncio.to_thread(review.store.save_label, item_id, reviewer.tenant, reviewer.name, label)
    except (ForeignItem, KeyError) as exc:
        raise PageError(404, f"no review item {item_id}") from exc
    except NotAssigned as exc:
        raise PageError(
            409,
            f"item {item_id} is not assigned to you (or its lease ran out): take your next "
            "item from /review/next",
        ) from exc
    review.metrics.labels_saved.labels(reviewer.tenant).inc()
    review.relay.wake.set()
    target = "/review/next" if form.get("action") == "save_next" else f"/review/items/{item_id}"
    return RedirectResponse(target, status_code=303)


@router.get("/calibration", response_class=HTMLResponse)
@_page
async def calibration(request: Request) -> Response:
    review, reviewer = await _signed_in(request)
    assert review.pool is not None
    pool = review.pool

    def compute() -> dict[str, dict[str, Any]]:
        with pool.connection() as conn:
            reports = all_reports(conn, reviewer.tenant, review.proxy_threshold)
            store_reports(conn, reviewer.tenant, reports)
            reports["signals"] = signals_report(conn, reviewer.tenant)  # shown, not stored
        return reports

    reports = await asyncio.to_thread(compute)
    return _render(request, review, "review/calibration.html", reviewer=reviewer, reports=reports)

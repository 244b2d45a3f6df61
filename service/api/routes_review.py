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
import html
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.datastructures import FormData

from service.api.auth import AuthError
from service.api.review_auth import CSRF_COOKIE, SESSION_COOKIE, Reviewer, reviewer_name
from service.api.review_state import STATIC, ReviewService
from service.api.state import STATE_KEY, ApiState
from service.contracts import limits as L
from service.review.reports import all_reports, store_reports
from service.review.store import ForeignItem, LabelInput

router = APIRouter(prefix="/review", include_in_schema=False)
REASONS = ("", "unsupported_claim", "contradicts_context", "missing_context", "wrong_documents", "incomplete",
           "refusal_wrong", "other")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


class PageError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _service(request: Request) -> ReviewService:
    state: ApiState = getattr(request.state, STATE_KEY)
    review = state.review
    if review is None or review.store is None:
        raise PageError(503, "the review page is off: set RAGMON_DATABASE_URL to a PostgreSQL (ragmon up starts one)")
    return review


def _reviewer(request: Request, review: ReviewService) -> Reviewer | None:
    header = request.headers.get("authorization")
    if header:
        state: ApiState = getattr(request.state, STATE_KEY)
        try:
            principal = state.keys.authenticate(header, scope="review")
        except AuthError as exc:
            raise PageError(exc.status, exc.message) from exc
        return Reviewer(principal.tenant, reviewer_name(principal.name), via_cookie=False)
    return review.signer.verify(request.cookies.get(SESSION_COOKIE))


def _render(request: Request, review: ReviewService, template: str, status: int = 200,
            reviewer: Reviewer | None = None, **context: Any) -> HTMLResponse:
    browser = request.cookies.get(CSRF_COOKIE) or review.signer.new_browser_token()
    html = review.templates.get_template(template).render(
        reviewer=reviewer, csrf=review.signer.csrf_token(browser), error=context.pop("error", None), **context)
    response = HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
    if request.cookies.get(CSRF_COOKIE) != browser:
        response.set_cookie(CSRF_COOKIE, browser, httponly=True, samesite="strict", path="/review",
                            secure=_https(request))
    return response


def _https(request: Request) -> bool:
    """Cookies are Secure whenever the reviewer's browser talks HTTPS (directly or through a proxy)."""
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


def _error_page(request: Request, exc: PageError) -> Response:
    try:
        review = _service(request)
    except PageError:
        return HTMLResponse(f"<p>{html.escape(exc.message)}</p>", status_code=exc.status, headers=SECURITY_HEADERS)
    return _render(request, review, "review/base.html", exc.status, error=exc.message)


async def _checked_form(request: Request, review: ReviewService, reviewer: Reviewer | None) -> FormData:
    """The posted form, after the CSRF check (skipped only for Bearer-key clients, which no browser sends)."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host"):
        raise PageError(403, f"cross-origin form post from {origin} refused (csrf)")
    form = await request.form()
    if reviewer is not None and not reviewer.via_cookie:
        return form
    token = form.get("csrf_token")
    if not review.signer.csrf_ok(request.cookies.get(CSRF_COOKIE), token if isinstance(token, str) else None):
        raise PageError(403, "csrf_token: missing or invalid; reload the page and submit again (csrf)")
    return form


def _signed_in(request: Request) -> tuple[ReviewService, Reviewer]:
    review = _service(request)
    reviewer = _reviewer(request, review)
    if reviewer is None:
        raise PageError(401, "sign in at /review with a review key")
    return review, reviewer


@router.get("/static/review.js")
async def script() -> FileResponse:
    return FileResponse(STATIC / "review.js", media_type="text/javascript", headers=SECURITY_HEADERS)


@router.get("", response_class=HTMLResponse)
async def index(request: Request) -> Response:
    try:
        review = _service(request)
        reviewer = _reviewer(request, review)
        if reviewer is None:
            return _render(request, review, "review/login.html")
        assert review.store is not None
        progress = await asyncio.to_thread(review.store.progress, reviewer.tenant, reviewer.name)
        reviewers = await asyncio.to_thread(review.store.reviewers, reviewer.tenant)
        return _render(request, review, "review/index.html", reviewer=reviewer, progress=progress,
                       reviewers=reviewers)
    except PageError as exc:
        return _error_page(request, exc)


@router.post("/login")
async def login(request: Request) -> Response:
    try:
        review = _service(request)
        form = await _checked_form(request, review, None)
        key = form.get("key")
        state: ApiState = getattr(request.state, STATE_KEY)
        try:
            principal = state.keys.authenticate(f"Bearer {key}" if isinstance(key, str) else None, scope="review")
        except AuthError as exc:
            raise PageError(exc.status, exc.message) from exc
        response = RedirectResponse("/review", status_code=303)
        response.set_cookie(SESSION_COOKIE, review.signer.issue(principal.tenant, reviewer_name(principal.name)),
                            max_age=review.settings.review_session_s, httponly=True, samesite="strict",
                            path="/review", secure=_https(request))
        return response
    except PageError as exc:
        return _error_page(request, exc)


@router.post("/logout")
async def logout(request: Request) -> Response:
    try:
        review, reviewer = _signed_in(request)
        await _checked_form(request, review, reviewer)
        response = RedirectResponse("/review", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/review")
        return response
    except PageError as exc:
        return _error_page(request, exc)


@router.get("/next")
async def next_item(request: Request) -> Response:
    try:
        review, reviewer = _signed_in(request)
        assert review.store is not None
        item_id = await asyncio.to_thread(review.store.next_item, reviewer.tenant, reviewer.name)
        if item_id is None:
            progress = await asyncio.to_thread(review.store.progress, reviewer.tenant, reviewer.name)
            return _render(request, review, "review/empty.html", reviewer=reviewer, progress=progress)
        return RedirectResponse(f"/review/items/{item_id}", status_code=303)
    except PageError as exc:
        return _error_page(request, exc)


def _documents(content: dict[str, Any]) -> list[dict[str, Any]]:
    """Context documents in prompt order, then exclusion candidates not in the context (ids only)."""
    docs = [dict(d) for d in content.get("documents", [])]
    seen = {d["id"] for d in docs}
    docs += [{"id": c["id"], "text": None, "score": c.get("score")} for c in content.get("candidates", [])
             if c["id"] not in seen]
    return docs


async def _load_item(review: ReviewService, reviewer: Reviewer, item_id: int) -> dict[str, Any]:
    assert review.store is not None
    try:
        item = await asyncio.to_thread(review.store.item, item_id, reviewer.tenant, reviewer.name)
    except ForeignItem as exc:
        raise PageError(403, f"item {item_id} belongs to another tenant") from exc
    if item is None:
        raise PageError(404, f"no review item {item_id}")
    return item


@router.get("/items/{item_id}", response_class=HTMLResponse)
async def show_item(request: Request, item_id: int) -> Response:
    try:
        review, reviewer = _signed_in(request)
        item = await _load_item(review, reviewer, item_id)
        assert review.store is not None
        progress = await asyncio.to_thread(review.store.progress, reviewer.tenant, reviewer.name)
        mine = item["my_label"]
        return _render(request, review, "review/item.html", reviewer=reviewer, item=item, mine=mine,
                       revealed=mine is not None, documents=_documents(item["content"]),
                       gold=set(mine["gold_ids"]) if mine else set(), reasons=REASONS, progress=progress,
                       max_note=L.MAX_NOTE_CHARS)
    except PageError as exc:
        return _error_page(request, exc)


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
    reason = form.get("reason") or ""
    if reason not in REASONS:
        raise PageError(422, f"reason: one of {[r for r in REASONS if r]} or empty")
    note = form.get("note") or ""
    if not isinstance(note, str) or len(note) > L.MAX_NOTE_CHARS:
        raise PageError(422, f"note: at most {L.MAX_NOTE_CHARS} characters")
    if note and review.redactor is not None:  # what reviewers type joins the golden set: no PII there either
        note = review.redactor.redact(note, Counter())
    return LabelInput(faithful == "yes", None if not answerable else answerable == "yes",
                      list(dict.fromkeys(gold)), reason or None, note.strip() or None)


@router.post("/items/{item_id}/label")
async def save_label(request: Request, item_id: int) -> Response:
    try:
        review, reviewer = _signed_in(request)
        form = await _checked_form(request, review, reviewer)
        item = await _load_item(review, reviewer, item_id)
        label = parse_label(form, {d["id"] for d in _documents(item["content"])}, review)
        assert review.store is not None and review.relay is not None
        await asyncio.to_thread(review.store.save_label, item_id, reviewer.tenant, reviewer.name, label)
        review.metrics.labels_saved.labels(reviewer.tenant).inc()
        review.relay.wake.set()
        target = "/review/next" if form.get("action") == "save_next" else f"/review/items/{item_id}"
        return RedirectResponse(target, status_code=303)
    except PageError as exc:
        return _error_page(request, exc)


@router.get("/calibration", response_class=HTMLResponse)
async def calibration(request: Request) -> Response:
    try:
        review, reviewer = _signed_in(request)
        assert review.pool is not None
        pool = review.pool

        def compute() -> dict[str, dict[str, Any]]:
            with pool.connection() as conn:
                reports = all_reports(conn, reviewer.tenant, review.proxy_threshold)
                store_reports(conn, reviewer.tenant, reports)
            return reports

        reports = await asyncio.to_thread(compute)
        return _render(request, review, "review/calibration.html", reviewer=reviewer, reports=reports)
    except PageError as exc:
        return _error_page(request, exc)

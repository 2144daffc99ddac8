"""Browser tests: Debian's Chromium driven by Playwright against pytest-django's live server.

They fail (never skip) when Chromium or Playwright is missing: CI installs
`chromium` from Debian and `playwright` from PyPI; `playwright install` is never
used (it downloads a browser).
"""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.browser import launch_chromium


@pytest.fixture(scope="package")
def chromium(django_db_setup):
    """One browser for the browser tests, gone before any other package's tests run.

    Playwright's sync API keeps an asyncio loop running on this thread while it
    lives, and Django refuses ORM calls from such a thread unless
    DJANGO_ALLOW_ASYNC_UNSAFE is set: it is set for exactly that span (the ORM
    calls are the test body's own; the live server answers from its threads).
    The test database is created before the loop starts.
    """
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


FAILURES_DIR = Path(__file__).resolve().parents[2] / "var" / "browser-failures"


def new_page(chromium, live_server, *, scale: float = 1):
    """A page of the live server in a context of its own: 1280 x 900 CSS px on a screen of `scale`
    device pixels per CSS px. The caller closes page.context."""
    context = chromium.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 900}, device_scale_factor=scale
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.dialogs = []
    return page


@pytest.fixture
def page_at(chromium, live_server):
    """page_at(scale): a new page on a screen of `scale` device pixels per CSS px (a dense screen's
    srcset choice); its context is closed after the test."""
    pages = []

    def make(scale: float):
        pages.append(new_page(chromium, live_server, scale=scale))
        return pages[-1]

    yield make
    for made in pages:
        made.context.close()


@pytest.fixture
def page(request, chromium, live_server):
    page = new_page(chromium, live_server)
    context = page.context
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    server_errors: list[str] = []
    page.on(
        "response",
        lambda r: server_errors.append(f"{r.status} {r.request.method} {r.url}") if r.status >= 500 else None,
    )
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        # Leave what the browser showed for whoever reads the failure.
        FAILURES_DIR.mkdir(parents=True, exist_ok=True)
        name = request.node.name
        page.screenshot(path=str(FAILURES_DIR / f"{name}.png"), full_page=True)
        (FAILURES_DIR / f"{name}.html").write_text(page.content())
        (FAILURES_DIR / f"{name}.server-errors.txt").write_text("\n".join(server_errors) + "\n")
    context.close()


def sign_in(page, username: str, next_url: str = "/admin/") -> None:
    page.goto(f"/admin/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("input[type=submit]")
    page.wait_for_load_state()


def open_upload_page(page, live_server, username: str, profile: str = "auto") -> None:
    """Sign in through the admin login, land on the upload page, pick a profile ("auto": by file type)."""
    sign_in(page, username, next_url="/")
    page.wait_for_url(f"{live_server.url}/")
    choose_profile(page, profile)


def choose_profile(page, profile: str = "auto") -> None:
    expect(page.locator("#profile")).to_be_enabled()
    page.select_option("#profile", profile)


# Uppy's Dashboard: its file input (the first; the second one picks folders).
DASHBOARD_INPUT = "#dashboard input.uppy-Dashboard-input >> nth=0"


def pick_files(page, files, **kwargs) -> None:
    """Give files to the Dashboard's picker, as a person choosing them does."""
    page.set_input_files(DASHBOARD_INPUT, files, **kwargs)


def upload_item(page, filename: str):
    """The page's row for a file: what Airlock made of it."""
    return page.locator("#items li.item").filter(has=page.locator(".name", has_text=filename))


def watch_csp(page) -> list[str]:
    """Collect the page's Content-Security-Policy violations (there must be none)."""
    violations: list[str] = []
    page.expose_function("airlockCspViolation", lambda text: violations.append(text))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "window.airlockCspViolation(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' "
        "+ e.lineNumber))"
    )
    return violations


@pytest.fixture
def moderator(make_user):
    from attachments.services.staff import moderator_group_ensure, platform_staff_group_ensure

    user = make_user("mod", tenant="staff", staff=True)
    user.groups.add(moderator_group_ensure(), platform_staff_group_ensure())  # platform staff: every tenant
    return user


# --- another app's origin (a plain page on 127.0.0.1, its own port): cross-origin to the live server ---------

APP_PAGE = b"<!doctype html><meta charset=utf-8><title>another app</title><p>app</p>"


@pytest.fixture
def app_origin() -> Iterator[str]:
    """The other app's origin: a plain page on 127.0.0.1, on a port of its own."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(APP_PAGE)))
            self.end_headers()
            self.wfile.write(APP_PAGE)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def app_page(chromium, app_origin):
    context = chromium.new_context()
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto(app_origin + "/")
    yield page
    context.close()

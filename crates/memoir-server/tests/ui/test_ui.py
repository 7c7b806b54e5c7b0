"""memoir ui in a real browser: the views, the way from a search hit to its
message, keyboard navigation, live updates of a session being written,
accessibility (axe-core), the gate (token, Host, Origin, CSP) from outside
the browser, and `sessions export --format html` opened from disk."""

import http.client
import json
import os
import re
import subprocess

import pytest

SESSION = "cc-77770000-0000-4000-8000-00000000ed17"


def raw_get(server, path, headers=None):
    """A GET with exactly these headers (Host included), outside any browser."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    c.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    hs = {"Host": f"127.0.0.1:{server.port}"}
    hs.update(headers or {})
    for k, v in hs.items():
        if v is not None:
            c.putheader(k, v)
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, dict(r.getheaders()), body


def cookie(server, value=None):
    return f"memoir_ui_{server.port}={value or server.token}"


# ---------- the gate ----------


def test_no_token_is_401_and_a_wrong_one_403(server):
    for path in ["/", "/api/sessions", "/assets/app.js", "/s/x"]:
        assert raw_get(server, path)[0] == 401, path
        assert raw_get(server, path, {"Cookie": cookie(server, "0" * 64)})[0] == 403, path
    assert raw_get(server, "/?token=" + "0" * 64)[0] == 403
    status, headers, _ = raw_get(server, "/api/sessions", {"Cookie": cookie(server)})
    assert status == 200


def test_the_token_becomes_a_strict_cookie_and_leaves_the_url(server):
    status, headers, _ = raw_get(server, f"/search?q=x&token={server.token}")
    assert status == 303
    assert headers["location"] == "/search?q=x"
    set_cookie = headers["set-cookie"]
    assert set_cookie.startswith(cookie(server) + ";")
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie


def test_foreign_host_is_refused_even_with_the_token(server):
    for host in ["evil.example", f"evil.example:{server.port}", f"127.0.0.1:{server.port + 1}", f"localhost.evil:{server.port}", None]:
        status, _, body = raw_get(server, "/api/sessions", {"Host": host, "Cookie": cookie(server)})
        assert status == 403 if host else status in (400, 403), host
    assert raw_get(server, "/api/sessions", {"Host": f"localhost:{server.port}", "Cookie": cookie(server)})[0] == 200


def test_foreign_origin_is_refused(server):
    for origin in ["http://evil.example", f"http://127.0.0.1:{server.port + 1}", "null", f"https://127.0.0.1:{server.port}"]:
        status, _, _ = raw_get(server, "/api/sessions", {"Origin": origin, "Cookie": cookie(server)})
        assert status == 403, origin
    ok = raw_get(server, "/api/sessions", {"Origin": f"http://127.0.0.1:{server.port}", "Cookie": cookie(server)})
    assert ok[0] == 200


def test_every_response_has_a_strict_csp(server):
    for path in ["/", "/assets/app.js", "/api/sessions", "/api/nothing"]:
        _, headers, _ = raw_get(server, path, {"Cookie": cookie(server)})
        csp = headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self';" in csp, path
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert headers["x-content-type-options"] == "nosniff"
    _, _, html = raw_get(server, "/", {"Cookie": cookie(server)})
    # No inline script or style, and no address outside this server.
    assert not re.search(rb"<script(?![^>]*\bsrc=)", html)
    assert b"<style" not in html and b"style=" not in html
    assert not re.search(rb"(src|href)=\"(https?:)?//", html)


# ---------- the views ----------


def shot(page, artefacts, name):
    page.screenshot(path=str(artefacts / f"{name}.png"), full_page=False)


def no_foreign_requests(page, server):
    foreign = [u for u in page.requests_seen if not (u.startswith(server.base + "/") or u.startswith("data:"))]
    assert not foreign, foreign
    csp = [m for m in page.console_seen if "Content Security Policy" in m]
    assert not csp, csp


def test_browse_search_changes_and_usage(page, server, artefacts):
    # The list: every agent's sessions, trees under their parents.
    assert page.url == server.base + "/"
    page.wait_for_selector("table.sessions tbody tr")
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() >= 8
    assert page.locator("tr.child .badge.rel-rewind").count() >= 1
    assert page.locator("tr.child .badge.rel-subagent").count() >= 1
    assert page.locator("td", has_text="codex").count() >= 1
    page.wait_for_function("() => [...document.querySelectorAll('td.cost')].some(td => td.textContent.startsWith('$'))")
    shot(page, artefacts, "1-sessions")

    # Filter by agent, then sort by messages, server-side.
    page.select_option("#f-agent", "codex")
    page.wait_for_url(re.compile(r"agent=codex"))
    page.wait_for_selector("table.sessions tbody tr")
    agents = page.locator("table.sessions tbody tr td:nth-child(2)").all_inner_texts()
    assert agents and set(agents) == {"codex"}
    page.goto(server.base + "/")

    # Open the editing session; a tool call shows its result beside it.
    page.get_by_role("link", name=re.compile("invoice rounding")).first.click()
    page.wait_for_selector("article.msg")
    assert page.url.startswith(server.base + "/s/")
    edit = page.locator("details.tool", has=page.locator(".tool-name", has_text="Edit")).first
    assert not edit.evaluate("d => d.open")
    edit.locator("summary").click()
    assert edit.evaluate("d => d.open")
    assert "exact.quantize" in edit.locator(".call").inner_text()
    assert "has been updated" in edit.locator(".result").inner_text()
    assert page.locator("details.thinking").count() >= 1
    assert page.locator(".divider.fork").count() >= 1, "the rewind's fork point is drawn"
    # A long tool result is cut, and loads in full on demand.
    bash = page.locator("details.tool", has=page.locator(".tool-arg", has_text="grep -n retry")).first
    bash.locator("summary").click()
    more = bash.locator("button.more")
    more.scroll_into_view_if_needed()
    before = len(page.locator("pre.code", has_text="worker[0]").first.inner_text())
    more.click()
    page.wait_for_function("() => !document.querySelector('button.more')")
    after = len(page.locator("pre.code", has_text="worker[0]").first.inner_text())
    assert after > before
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, artefacts, "2-session")

    # j / k move between messages.
    page.locator("body").press("j")
    page.locator("body").press("j")
    first = page.evaluate("document.activeElement.id")
    page.locator("body").press("k")
    second = page.evaluate("document.activeElement.id")
    assert first.startswith("m-") and second.startswith("m-") and first != second

    # Search as you type; a hit lands on its message, highlighted.
    page.get_by_role("link", name="Search").click()
    page.fill("#f-q", "quantize")
    page.wait_for_selector("ol.hits li")
    assert page.locator("ol.hits mark").count() >= 1
    shot(page, artefacts, "3-search")
    page.locator("a.hit-link").first.click()
    page.wait_for_selector(".hit")
    assert re.search(r"/s/[^/]+\?q=quantize#seq-\d+$", page.url)
    hit = page.locator(".hit").first
    assert hit.is_visible()
    assert hit.locator("mark").count() >= 1
    assert "quantize" in hit.locator("mark").first.inner_text().lower()

    # Changes: files with diffs, each linked back to its message.
    page.goto(server.base + f"/s/{SESSION}/changes")
    page.wait_for_selector("section.file")
    files = page.locator("section.file h2").all_inner_texts()
    assert any(f.endswith("src/invoice.py") for f in files)
    assert any(f.endswith("tests/test_rounding.py") for f in files)
    assert page.locator("table.diff tr.add").count() >= 5
    assert page.locator("table.diff tr.del").count() >= 2
    shot(page, artefacts, "4-changes")
    page.locator(".change-head a").first.click()
    page.wait_for_selector(".hit")
    assert "exact.quantize" in page.locator(".hit").inner_text()

    # Blame: from a changed file to the session and message that last wrote it.
    page.goto(server.base + f"/s/{SESSION}/changes")
    page.wait_for_selector("section.file")
    invoice = page.locator("section.file", has=page.locator("h2", has_text="src/invoice.py")).first
    invoice.locator("a.blame-link").click()
    page.wait_for_selector("table.blame tbody tr")
    assert page.url.startswith(server.base + "/blame?path=")
    assert page.locator("h1 code").inner_text().endswith("src/invoice.py")
    last = page.locator("p.last-writer")
    assert "invoice rounding" in last.inner_text()
    edits = page.locator("table.blame tbody tr")
    assert edits.count() >= 2, "every recorded edit of the file is listed"
    assert edits.first.locator("td:nth-child(4)").inner_text() in ("Edit", "MultiEdit", "Write", "apply_patch")
    shot(page, artefacts, "4b-blame")
    writer = last.locator("a").nth(1)
    target = writer.get_attribute("href")
    assert re.match(r"^/s/[^/#]+#(seq|m)-\d+$", target), target
    writer.click()
    page.wait_for_selector(".hit")
    assert page.url == server.base + target
    assert page.locator(".hit").first.is_visible()
    assert page.locator(".hit details.tool .tool-name").first.inner_text() in ("Edit", "MultiEdit", "Write")

    # Usage: charts drawn as SVG, by day and by model.
    page.goto(server.base + "/usage")
    page.wait_for_selector("svg.chart rect.bar")
    assert page.locator("svg.chart rect.bar").count() >= 3
    shot(page, artefacts, "5-usage")
    page.select_option("#f-by", "model")
    page.wait_for_url(re.compile(r"by=model"))
    page.wait_for_selector("svg.chart rect.bar")
    assert page.locator("table.usage-table tbody th", has_text="claude-opus").count() == 1
    # 5-hour billing blocks: one bar per block, keyed by its start.
    page.select_option("#f-by", "block")
    page.wait_for_url(re.compile(r"by=block"))
    page.wait_for_selector("svg.chart rect.bar")
    starts = page.locator("table.usage-table tbody th").all_inner_texts()
    assert starts and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:00", s) for s in starts), starts
    assert page.locator("svg.chart rect.bar").count() == len(starts)

    no_foreign_requests(page, server)


def test_a_ten_thousand_message_session_renders_progressively(page, server):
    """The first messages show at once, a deep link far down lands on its
    message before the rest is drawn, and the whole session arrives."""
    long = "cc-77770000-0000-4000-8000-0000000010ad"
    page.goto(server.base + f"/s/{long}#m-9500")
    page.wait_for_selector("#m-9500.hit")
    assert "step 4750" in page.locator("#m-9500").inner_text()
    assert page.locator("#m-9500").is_visible()
    page.wait_for_selector('section.conversation[aria-busy="false"]', timeout=60_000)
    assert page.locator("article.msg").count() == 10_000
    page.locator("body").press("j")
    assert page.evaluate("document.activeElement.id") == "m-9501"


def test_a_long_session_comes_in_two_requests(page, server):
    """Without a deep link, a long session's head and first messages come
    in one request and the rest in one more; every message is drawn and
    the live stream starts after the last."""
    long = "cc-77770000-0000-4000-8000-0000000010ad"
    seen = []
    page.on("request", lambda r: f"/api/sessions/{long}" in r.url and seen.append(r.url))
    page.goto(server.base + f"/s/{long}")
    page.wait_for_selector("#m-0")
    page.wait_for_selector('section.conversation[aria-busy="false"]', timeout=60_000)
    assert page.locator("article.msg").count() == 10_000
    assert page.locator(".msg-count").inner_text() == "10,000"
    reads = [u for u in seen if "/events" not in u]
    assert len(reads) == 2, reads
    assert reads[0].endswith("?limit=200") and reads[1].endswith("?from=200"), reads
    for _ in range(100):
        if any("/events?from=10000" in u for u in seen):
            break
        page.wait_for_timeout(100)
    assert any("/events?from=10000" in u for u in seen), seen


@pytest.mark.parametrize(
    "path,ready",
    [
        ("/", "table.sessions"),
        (f"/s/{SESSION}", "article.msg"),
        ("/search?q=rounding", "ol.hits"),
        (f"/s/{SESSION}/changes", "section.file"),
        (f"/blame?path=src/invoice.py&session={SESSION}", "table.blame"),
        ("/usage", "svg.chart"),
    ],
)
def test_accessibility(browser, server, path, ready):
    """axe-core finds no serious or critical violation in any view."""
    axe = os.environ.get("AXE_JS")
    if not axe:
        pytest.skip("AXE_JS (axe-core's axe.min.js) not set")
    # axe is injected as an inline script: only this context bypasses the CSP.
    ctx = browser.new_context(bypass_csp=True, viewport={"width": 1400, "height": 900})
    try:
        pg = ctx.new_page()
        pg.goto(server.url)
        pg.goto(server.base + path)
        pg.wait_for_selector(ready)
        pg.add_script_tag(path=axe)
        result = pg.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        bad = [
            f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert not bad, "\n".join(bad)
    finally:
        ctx.close()


# ---------- live updates ----------


def memoir(env, workdir, *args):
    from conftest import memoir_bin

    out = subprocess.run([memoir_bin(), *args], env=env, cwd=workdir, check=True, capture_output=True, text=True)
    return out.stdout


def new_session(env, workdir, store, task):
    made = json.loads(memoir(env, workdir, "sessions", "new", task, "--dir", str(store), "--json"))
    return made["id"], made["path"]


def append(env, workdir, path, count, tag):
    """Messages appended through the library by another process, as an agent does."""
    memoir(env, workdir, "debug", "append-loop", path, "--count", str(count), "--tag", tag, "--size", "300")


def at_bottom(page):
    return page.evaluate("() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 30")


def test_a_session_being_written_updates_in_place(page, server, store, env, workdir, artefacts):
    sid, path = new_session(env, workdir, store, "a session written while it is watched")
    append(env, workdir, path, 40, "before")
    page.goto(server.base + f"/s/{sid}")
    page.wait_for_selector("#m-40")
    page.evaluate("window.__samePage = true")

    # Read from the top: new messages arrive, the reader stays where they are.
    page.evaluate("window.scrollTo(0, 0)")
    append(env, workdir, path, 3, "above")
    page.wait_for_selector("#m-43", timeout=10_000)
    assert "above:2:" in page.locator("#m-43").text_content()  # off screen: not laid out
    assert page.evaluate("window.scrollY") == 0
    assert page.locator(".msg-count").inner_text().startswith("44")
    assert "3 new messages" in page.locator(".live-note").inner_text()

    # At the bottom: the view follows the new messages.
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    assert at_bottom(page)
    append(env, workdir, path, 2, "follow")
    page.wait_for_selector("#m-45", timeout=10_000)
    page.wait_for_function("() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 30")
    assert page.locator("#m-45").is_visible()
    assert page.evaluate("window.__samePage") is True, "the page was not reloaded"
    assert page.locator("article.msg").count() == 46
    shot(page, artefacts, "6-live")
    no_foreign_requests(page, server)


def test_live_streams_are_gated(server):
    path = f"/api/sessions/{SESSION}/events"
    assert raw_get(server, path)[0] == 401
    assert raw_get(server, path, {"Cookie": cookie(server), "Origin": "http://evil.example"})[0] == 403
    assert raw_get(server, "/api/sessions/missing-session/events", {"Cookie": cookie(server)})[0] == 404


# ---------- export ----------

HOSTILE = (
    "<script>window.__pwned = 1</script> </style><script>window.__pwned = 2</script> "
    "<img src=x onerror=\"window.__pwned = 3\"> <a href=\"javascript:window.__pwned = 4\">click</a> "
    "&lt;b&gt; \u0007 \u001b[31m"
)


def open_export(browser, file):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = ctx.new_page()
    pg.errors_seen = []
    pg.requests_seen = []
    pg.on("console", lambda m: m.type in ("error", "warning") and pg.errors_seen.append(m.text))
    pg.on("pageerror", lambda e: pg.errors_seen.append(str(e)))
    pg.on("request", lambda r: pg.requests_seen.append(r.url))
    pg.goto(file.as_uri())
    return ctx, pg


def test_an_exported_session_opens_from_disk(browser, store, env, workdir, artefacts):
    out = workdir / "export-edit.html"
    memoir(env, workdir, "sessions", "export", SESSION, "--format", "html", "-o", str(out), "--dir", str(store))
    ctx, pg = open_export(browser, out)
    try:
        assert "invoice rounding" in pg.locator("h1").inner_text()
        assert pg.locator("article.msg").count() >= 5
        edit = pg.locator("details.tool", has=pg.locator(".tool-name", has_text="Edit")).first
        edit.locator("summary").click()
        assert "exact.quantize" in edit.locator(".call").inner_text()
        assert "has been updated" in edit.locator(".result").inner_text()
        shot(pg, artefacts, "7-export")
        assert not pg.errors_seen, pg.errors_seen
        others = [u for u in pg.requests_seen if u != out.as_uri() and not u.startswith("data:")]
        assert not others, others
    finally:
        ctx.close()


def test_an_exported_hostile_transcript_stays_text(browser, store, env, workdir):
    sid, path = new_session(env, workdir, store, HOSTILE)
    out = workdir / "export-hostile.html"
    memoir(env, workdir, "sessions", "export", sid, "--format", "html", "-o", str(out), "--dir", str(store))
    ctx, pg = open_export(browser, out)
    try:
        text = pg.locator("article.msg .text").first.inner_text()
        assert "<script>window.__pwned = 1</script>" in text
        assert "</style>" in text and "javascript:window.__pwned = 4" in text and "&lt;b&gt;" in text
        for link in pg.locator("a").all():
            click_href = link.get_attribute("href")
            assert click_href.startswith("#m-"), click_href
        assert pg.locator("script, img, iframe, object, embed").count() == 0
        assert pg.evaluate("window.__pwned") is None
        assert not pg.errors_seen, pg.errors_seen
    finally:
        ctx.close()


def test_an_exported_page_is_accessible(browser, store, env, workdir):
    """axe-core finds no serious or critical violation in an exported page."""
    axe = os.environ.get("AXE_JS")
    if not axe:
        pytest.skip("AXE_JS (axe-core's axe.min.js) not set")
    out = workdir / "export-a11y.html"
    memoir(env, workdir, "sessions", "export", SESSION, "--format", "html", "-o", str(out), "--dir", str(store))
    # axe is injected as an inline script: only this context bypasses the page's CSP.
    ctx = browser.new_context(bypass_csp=True)
    try:
        pg = ctx.new_page()
        pg.goto(out.as_uri())
        pg.add_script_tag(path=axe)
        result = pg.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        bad = [f"{v['id']} ({v['impact']}): {v['help']}" for v in result["violations"] if v["impact"] in ("serious", "critical")]
        assert not bad, "\n".join(bad)
    finally:
        ctx.close()

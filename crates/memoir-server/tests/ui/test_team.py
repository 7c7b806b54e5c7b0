"""The team view of `memoir serve` in a real browser: the same page served to
each bearer token, scoped to that token's project. Two projects are pushed
to one server with `memoir sync` (the test history to one, a session of its
own to the other); each token's browser sees only its project's sessions,
another project's session is not found, and a wrong token, a foreign `Host`
and a foreign `Origin` are refused."""

import http.client
import json
import re
import subprocess

import pytest

from conftest import memoir_bin

ALPHA = "alpha-team-token-0123456789abcdef"
BETA = "beta-team-token-0123456789abcdef0"
BETA_TASK = "beta's private ledger migration"
EDITING = "invoice rounding"

def run(env, workdir, *args):
    out = subprocess.run([memoir_bin(), *args], env=env, cwd=workdir, check=True, capture_output=True, text=True)
    return out.stdout

class Team:
    def __init__(self, proc, base):
        self.proc = proc
        self.base = base
        self.port = int(base.rsplit(":", 1)[1])

@pytest.fixture(scope="module")
def team(store, env, workdir):
    proc = subprocess.Popen(
        [
            memoir_bin(), "serve",
            "--store", str(workdir / "team-store"),
            "--listen", "127.0.0.1:0",
            "--durability", "none",
            "--token", f"alpha={ALPHA}",
            "--token", f"beta={BETA}",
        ],
        env=env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    m = re.search(r"listening on (http://127\.0\.0\.1:\d+)$", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"memoir serve printed {line!r}: " + proc.stderr.read())
    t = Team(proc, m.group(1))
    try:
        # alpha: the whole test history; beta: one session of its own.
        run(env, workdir, "sync", "--dir", str(store), "--remote", t.base, "--token", ALPHA)
        beta_local = workdir / "beta-store"

        made = json.loads(run(env, workdir, "sessions", "new", BETA_TASK, "--dir", str(beta_local), "--json"))
        run(env, workdir, "debug", "append-loop", made["path"], "--count", "4", "--tag", "ledger", "--size", "200")
        run(env, workdir, "sync", "--dir", str(beta_local), "--remote", t.base, "--token", BETA)
        t.beta_session = made["id"]
        yield t
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()

def raw_get(team, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", team.port, timeout=10)
    c.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    hs = {"Host": f"127.0.0.1:{team.port}"}
    hs.update(headers or {})
    for k, v in hs.items():
        if v is not None:
            c.putheader(k, v)
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, dict(r.getheaders()), body

def cookie(team, token):
    return f"memoir_team_{team.port}={token}"

def login(browser, team, token):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.requests_seen = []
    pg.console_seen = []
    pg.on("request", lambda r: pg.requests_seen.append(r.url))
    pg.on("console", lambda m: pg.console_seen.append(m.text))
    pg.goto(f"{team.base}/?token={token}")
    return ctx, pg

def titles(pg):
    pg.wait_for_selector("table.sessions tbody tr")
    return pg.locator("table.sessions td.title").all_inner_texts()

def no_foreign_requests(pg, team):
    foreign = [u for u in pg.requests_seen if not (u.startswith(team.base + "/") or u.startswith("data:"))]
    assert not foreign, foreign
    csp = [m for m in pg.console_seen if "Content Security Policy" in m]
    assert not csp, csp

def test_each_token_sees_only_its_project(browser, team, artefacts):
    ctx, pg = login(browser, team, ALPHA)
    try:
        # The token left the URL for a cookie; the list is alpha's history.
        assert pg.url == team.base + "/"
        alpha = titles(pg)
        assert len(alpha) >= 8, alpha
        assert any(EDITING in t for t in alpha), alpha
        assert not any("ledger" in t for t in alpha), alpha
        pg.wait_for_function("() => [...document.querySelectorAll('td.cost')].some(td => td.textContent.startsWith('$'))")
        pg.screenshot(path=str(artefacts / "8-team-alpha.png"))

        # Beta's session, asked for by id from alpha's browser: not found.
        pg.goto(f"{team.base}/s/{team.beta_session}")
        pg.wait_for_selector("p.error")
        assert "ledger" not in pg.locator("main").inner_text()
        # Search finds nothing of beta's.
        pg.goto(f"{team.base}/search?q=ledger")
        pg.wait_for_selector(".results p.empty, ol.hits")
        assert pg.locator("ol.hits li").count() == 0

        # Alpha's own session opens, and its changes lead to blame.
        pg.goto(team.base + "/")
        pg.get_by_role("link", name=re.compile(EDITING)).first.click()
        pg.wait_for_selector("article.msg")
        pg.get_by_role("link", name="Changes").click()
        pg.wait_for_selector("section.file a.blame-link")
        pg.locator("section.file a.blame-link").first.click()
        pg.wait_for_selector("table.blame tbody tr")
        assert EDITING in pg.locator("p.last-writer").inner_text()
        no_foreign_requests(pg, team)
    finally:
        ctx.close()

    ctx, pg = login(browser, team, BETA)
    try:
        beta = titles(pg)
        assert len(beta) == 1 and "ledger" in beta[0], beta
        pg.screenshot(path=str(artefacts / "9-team-beta.png"))
        pg.locator("table.sessions td.title a").first.click()
        pg.wait_for_selector("article.msg")
        assert pg.locator("article.msg").count() >= 4
        pg.goto(f"{team.base}/search?q=quantize")
        pg.wait_for_selector(".results p.empty, ol.hits")
        assert pg.locator("ol.hits li").count() == 0
        no_foreign_requests(pg, team)
    finally:
        ctx.close()

def test_a_wrong_token_is_refused(browser, team):
    assert raw_get(team, "/")[0] == 401
    assert raw_get(team, "/?token=" + "x" * 32)[0] == 403
    assert raw_get(team, "/api/sessions", {"Cookie": cookie(team, "y" * 32)})[0] == 403
    assert raw_get(team, "/api/sessions", {"Cookie": cookie(team, ALPHA)})[0] == 200
    # In a browser: the refusal is the whole answer, no session shown.
    ctx = browser.new_context()
    try:
        pg = ctx.new_page()
        resp = pg.goto(f"{team.base}/?token={'z' * 32}")
        assert resp.status == 403
        assert pg.locator("table.sessions").count() == 0
    finally:
        ctx.close()

def test_a_foreign_host_or_origin_is_refused(team):
    for host in ["evil.example", f"evil.example:{team.port}", f"127.0.0.1:{team.port + 1}"]:
        status, _, _ = raw_get(team, "/api/sessions", {"Host": host, "Cookie": cookie(team, ALPHA)})
        assert status == 403, host
        status, _, _ = raw_get(team, f"/?token={ALPHA}", {"Host": host})
        assert status == 403, host
    for origin in ["http://evil.example", f"http://127.0.0.1:{team.port + 1}", "null"]:
        status, _, _ = raw_get(team, "/api/sessions", {"Origin": origin, "Cookie": cookie(team, ALPHA)})
        assert status == 403, origin
    ok = raw_get(team, "/api/sessions", {"Origin": team.base, "Cookie": cookie(team, ALPHA)})
    assert ok[0] == 200
    _, headers, _ = raw_get(team, "/", {"Cookie": cookie(team, ALPHA)})
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp and "unsafe-inline" not in csp

"""Browser half of `memoir-bench ui`: times web views of a session store in
headless Chromium (Debian's `chromium`, driven by Playwright for Python, the
same pins as the browser tests: crates/memoir-server/tests/ui/requirements.txt).

Input (argv[1]): a JSON file
    {"chromium": "/usr/bin/chromium", "runs": 5, "targets": [
        {"name", "base",             # http://127.0.0.1:PORT
         "login",                    # a URL opened once first (a token), or null
         "list_path",                # the page listing sessions
         "row",                      # CSS selector of one session row
         "list_api",                 # regex of the session-list API request
         "session_path",             # the page of the large session
         "message"}]}                # CSS selector of one message
Output (stdout): one JSON object per target, a list of them.

Each run opens a fresh page (the login cookie kept, nothing else cached by
the servers' headers) and measures from `goto` to the first row that is
visible, and the page's first contentful paint; the API requests the page made until then are counted. The list
API request seen is then re-sent from the page (warm) and timed. The large
session is timed from `goto` to its first visible message.
"""

import json
import re
import statistics
import sys
import time

from playwright.sync_api import sync_playwright


def timed_visit(page, url, selector, api_re=None, timeout=120_000):
    calls = []
    seen = []

    def on_request(req):
        path = req.url.split("?", 1)[0]
        if "/api/" in path:
            calls.append(req.url)
            if api_re and re.search(api_re, req.url) and not seen:
                seen.append(req.url)

    page.on("request", on_request)
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit", timeout=timeout)
    page.locator(selector).first.wait_for(state="visible", timeout=timeout)
    ms = (time.perf_counter() - t0) * 1000
    n = len(calls)
    page.remove_listener("request", on_request)
    page.first_paint_ms = page.evaluate(
        "() => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime ?? null"
    )
    return ms, n, (seen[0] if seen else None)


def warm_fetch(page, url):
    return page.evaluate(
        """async (u) => {
            const t = performance.now();
            const r = await fetch(u, {credentials: "same-origin"});
            await r.text();
            return performance.now() - t;
        }""",
        url,
    )


def bench(browser, t, runs):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    out = {"name": t["name"]}
    try:
        if t.get("login"):
            p = ctx.new_page()
            p.goto(t["login"], wait_until="domcontentloaded", timeout=120_000)
            p.close()
        firsts, paints, calls, warm = [], [], [], []
        list_url = None
        for _ in range(runs):
            p = ctx.new_page()
            ms, n, seen = timed_visit(p, t["base"] + t["list_path"], t["row"], t.get("list_api"))
            firsts.append(ms)
            if p.first_paint_ms is not None:
                paints.append(p.first_paint_ms)
            calls.append(n)
            list_url = list_url or seen
            if list_url:
                warm.append(warm_fetch(p, list_url))
            p.close()
        out["first_row_ms"] = statistics.median(firsts)
        out["first_row_all_ms"] = [round(x) for x in firsts]
        out["first_paint_ms"] = statistics.median(paints) if paints else None
        out["api_calls_before_row"] = statistics.median(calls)
        out["list_api"] = list_url
        out["list_warm_ms"] = statistics.median(warm) if warm else None
        if t.get("session_path"):
            opens = []
            for _ in range(max(1, runs // 2 + 1)):
                p = ctx.new_page()
                ms, _, _ = timed_visit(p, t["base"] + t["session_path"], t["message"])
                opens.append(ms)
                p.close()
            out["session_first_message_ms"] = statistics.median(opens)
            out["session_all_ms"] = [round(x) for x in opens]
    except Exception as e:  # a peer that fails is reported, not fatal
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        ctx.close()
    return out


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=cfg.get("chromium", "/usr/bin/chromium"),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            for t in cfg["targets"]:
                results.append(bench(browser, t, cfg.get("runs", 5)))
        finally:
            browser.close()
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()

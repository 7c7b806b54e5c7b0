// memoir's web view: a small single-page front end over the read-only JSON
// API of `memoir ui` (crates/memoir-server/src/ui/api.rs). Plain DOM, no
// framework, no build step, nothing fetched from anywhere but this server.
// Every piece of session data is put in the page as text (textContent),
// never as markup.
"use strict";

(function () {
  const main = document.getElementById("main");
  const PAGE = 50;
  const CHUNK = 400; // messages rendered per frame
  const FIRST = 200; // messages of a session's first request (the rest follow in one more)

  // ---------- small helpers ----------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  async function api(path) {
    const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.message || `${r.status} ${r.statusText}`);
    return body;
  }

  function fmtInt(n) {
    return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US");
  }
  function fmtTokens(n) {
    if (!n) return "0";
    if (n >= 1e9) return (n / 1e9).toFixed(1) + "B";
    if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (n >= 1e4) return (n / 1e3).toFixed(0) + "k";
    if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
    return String(n);
  }
  function fmtUsd(x, lowerBound) {
    if (x === null || x === undefined) return "";
    const s = x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(4);
    return (lowerBound ? "≥ $" : "$") + s;
  }
  function fmtTime(t) {
    if (!t) return "";
    const d = new Date(t);
    if (isNaN(d)) return t;
    return d.toISOString().slice(0, 16).replace("T", " ");
  }
  function shortProject(p) {
    if (!p) return "";
    const parts = p.split(/[\\/]/).filter(Boolean);
    return parts.length ? parts[parts.length - 1] : p;
  }
  function sessionUrl(id, extra) {
    return "/s/" + encodeURIComponent(id) + (extra || "");
  }
  function debounce(fn, ms) {
    let t = null;
    return (...a) => {
      clearTimeout(t);
      t = setTimeout(() => fn(...a), ms);
    };
  }
  function setTitle(t) {
    document.title = t ? `${t} · memoir` : "memoir";
  }
  function errorBox(e) {
    return el("p", { class: "error", role: "alert" }, "Error: " + (e && e.message ? e.message : e));
  }

  // ---------- routing ----------

  let generation = 0; // bumps on every navigation: stale async work stops
  let liveSource = null; // the open session's live stream (closed on navigation)

  function navigate(url, replace) {
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
    route();
  }

  document.addEventListener("click", (ev) => {
    const a = ev.target.closest("a");
    if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
    const href = a.getAttribute("href");
    if (!href || href.startsWith("#") || a.target || a.hasAttribute("download")) return;
    const url = new URL(href, location.href);
    if (url.origin !== location.origin) return;
    ev.preventDefault();
    if (url.pathname === location.pathname && url.search === location.search && url.hash) {
      history.pushState(null, "", url.href);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
      return;
    }
    navigate(url.pathname + url.search + url.hash);
  });
  window.addEventListener("popstate", route);

  function markNav(view) {
    for (const a of document.querySelectorAll("nav a[data-view]")) {
      if (a.dataset.view === view) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
  }

  function route() {
    generation++;
    if (liveSource) {
      liveSource.close();
      liveSource = null;
    }
    window.onkeydown = null;
    const path = location.pathname;
    const params = new URLSearchParams(location.search);
    main.replaceChildren();
    let m;
    if ((m = path.match(/^\/s\/([^/]+)\/changes$/))) {
      markNav("sessions");
      viewChanges(decodeURIComponent(m[1]));
    } else if ((m = path.match(/^\/s\/([^/]+)$/))) {
      markNav("sessions");
      viewSession(decodeURIComponent(m[1]), params);
    } else if (path === "/blame") {
      markNav("sessions");
      viewBlame(params);
    } else if (path === "/search") {
      markNav("search");
      viewSearch(params);
    } else if (path === "/usage") {
      markNav("usage");
      viewUsage(params);
    } else {
      markNav("sessions");
      viewSessions(params);
    }
  }

  // ---------- facets (agents, projects, models) ----------

  let facetsPromise = null;
  function facets() {
    if (!facetsPromise) {
      facetsPromise = api("/api/facets").then((f) => {
        const s = document.getElementById("store-summary");
        if (s) s.textContent = `${fmtInt(f.sessions)} sessions`;
        return f;
      });
      facetsPromise.catch(() => (facetsPromise = null));
    }
    return facetsPromise;
  }

  function selectOf(name, label, values, current) {
    const id = "f-" + name;
    const sel = el("select", { id, name }, el("option", { value: "" }, `all`));
    for (const [v, n] of values) {
      sel.append(el("option", { value: v, selected: v === current }, `${v.length > 60 ? "…" + v.slice(-58) : v} (${n})`));
    }
    return [el("label", { for: id }, label), sel];
  }

  function input(name, label, value, type, extra) {
    const id = "f-" + name;
    return [el("label", { for: id }, label), el("input", Object.assign({ id, name, type: type || "text", value: value || "" }, extra || {}))];
  }

  // ---------- Sessions ----------

  const SORTS = [
    ["created", "Started"],
    ["activity", "Last activity"],
    ["messages", "Messages"],
    ["tokens", "Tokens"],
    ["title", "Title"],
  ];

  async function viewSessions(params) {
    setTitle("Sessions");
    const gen = generation;
    const form = el("form", { class: "filters", role: "search", "aria-label": "Filter sessions" });
    const table = el("div", { class: "table-wrap" });
    const pager = el("nav", { class: "pager", "aria-label": "Pages" });
    main.append(el("h1", { text: "Sessions" }), form, table, pager);

    // The page of rows and the filters' choices are asked for at once; the
    // rows are drawn as soon as they come.
    const q = new URLSearchParams(params);
    const offset = Number(params.get("offset") || 0);
    q.set("offset", offset);
    q.set("limit", PAGE);
    const pageRequest = api("/api/sessions?" + q.toString());
    pageRequest.catch(() => {});
    const p = (k) => params.get(k) || "";
    const filters = (f) => form.append(
      el("div", { class: "field" }, input("q", "Title or id", p("q"), "search")),
      el("div", { class: "field" }, selectOf("agent", "Agent", Object.entries(f.agents), p("agent"))),
      el("div", { class: "field" }, selectOf("project", "Project", Object.entries(f.projects), p("project"))),
      el("div", { class: "field" }, input("model", "Model", p("model"))),
      el("div", { class: "field" }, input("since", "From", p("since"), "date")),
      el("div", { class: "field" }, input("until", "To", p("until"), "date")),
      el(
        "div",
        { class: "field" },
        el("label", { for: "f-sort" }, "Sort by"),
        el("select", { id: "f-sort", name: "sort" }, SORTS.map(([v, l]) => el("option", { value: v, selected: v === (p("sort") || "created") }, l)))
      ),
      el(
        "div",
        { class: "field" },
        el("label", { for: "f-dir" }, "Order"),
        el(
          "select",
          { id: "f-dir", name: "dir" },
          el("option", { value: "desc", selected: p("dir") !== "asc" }, "newest / largest first"),
          el("option", { value: "asc", selected: p("dir") === "asc" }, "oldest / smallest first")
        )
      )
    );
    const apply = () => {
      const q = new URLSearchParams();
      for (const e of form.elements) if (e.name && e.value) q.set(e.name, e.value);
      navigate("/?" + q.toString(), true);
    };
    form.addEventListener("change", apply);
    form.addEventListener("input", debounce((ev) => ev.target.type === "search" && apply(), 300));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      apply();
    });
    facets()
      .then((f) => gen === generation && filters(f))
      .catch((e) => gen === generation && main.append(errorBox(e)));

    let page;
    try {
      page = await pageRequest;
    } catch (e) {
      table.append(errorBox(e));
      return;
    }
    if (gen !== generation) return;

    const sortCol = p("sort") || "created";
    const dir = p("dir") === "asc" ? "asc" : "desc";
    const th = (label, key, cls) => {
      if (!key) return el("th", { scope: "col", class: cls }, label);
      const active = key === sortCol;
      const next = new URLSearchParams(params);
      next.set("sort", key);
      next.set("dir", active && dir === "desc" ? "asc" : "desc");
      next.delete("offset");
      return el(
        "th",
        { scope: "col", class: cls, "aria-sort": active ? (dir === "asc" ? "ascending" : "descending") : null },
        el("a", { href: "/?" + next.toString() }, label, active ? (dir === "asc" ? " ▲" : " ▼") : "")
      );
    };
    const tbody = el("tbody");
    const t = el(
      "table",
      { class: "sessions" },
      el("caption", { class: "sr-only" }, "Sessions, with forks, rewinds and subagents under their parent"),
      el(
        "thead",
        null,
        el(
          "tr",
          null,
          th("Title", "title"),
          th("Agent"),
          th("Project"),
          th("Model"),
          th("Started", "created"),
          th("Messages", "messages", "num"),
          th("Tokens", "tokens", "num"),
          th("Cost", null, "num")
        )
      ),
      tbody
    );
    const costCells = new Map();
    for (const r of page.rows) {
      const title = el("a", { href: sessionUrl(r.id) }, r.title || r.id);
      const rel = r.relation ? el("span", { class: "badge rel-" + r.relation, title: `${r.relation} of ${r.parent}` }, r.relation) : null;
      const cost = el("td", { class: "num cost" });
      costCells.set(r.id, cost);
      tbody.append(
        el(
          "tr",
          { class: r.depth ? "child" : "root", "data-id": r.id },
          el(
            "td",
            { class: "title depth-" + Math.min(r.depth, 6) },
            r.depth ? el("span", { class: "branch", "aria-hidden": "true" }, "└ ") : null,
            rel,
            title,
            r.status !== "active" ? el("span", { class: "badge warn" }, r.status) : null
          ),
          el("td", { class: "agent" }, r.agent),
          el("td", { class: "project", title: r.project }, shortProject(r.project)),
          el("td", { class: "model" }, r.model),
          el("td", { class: "time" }, el("time", { datetime: r.created_at }, fmtTime(r.created_at))),
          el("td", { class: "num" }, fmtInt(r.messages)),
          el("td", { class: "num", title: fmtInt(r.tokens) + " tokens" }, fmtTokens(r.tokens)),
          cost
        )
      );
    }
    if (!page.rows.length) {
      table.append(el("p", { class: "empty" }, "No sessions match."));
    } else {
      table.append(t);
    }
    const from = page.roots ? offset + 1 : 0;
    const to = Math.min(offset + PAGE, page.roots);
    const link = (label, off, rel) => {
      const n = new URLSearchParams(params);
      n.set("offset", off);
      return el("a", { href: "/?" + n.toString(), rel }, label);
    };
    pager.append(
      offset > 0 ? link("← Newer", Math.max(0, offset - PAGE), "prev") : el("span", { class: "disabled" }, "← Newer"),
      el("span", { class: "count" }, `${fmtInt(from)}–${fmtInt(to)} of ${fmtInt(page.roots)} trees (${fmtInt(page.sessions)} sessions)`),
      to < page.roots ? link("Older →", offset + PAGE, "next") : el("span", { class: "disabled" }, "Older →")
    );

    // Costs: each session's own responses priced by the library, filled in
    // after the page is shown.
    const ids = [...costCells.keys()];
    for (let i = 0; i < ids.length; i += 50) {
      const batch = ids.slice(i, i + 50);
      api("/api/costs?ids=" + batch.map(encodeURIComponent).join(","))
        .then((costs) => {
          if (gen !== generation) return;
          for (const id of batch) {
            const c = costs[id];
            const cell = costCells.get(id);
            if (!c || !cell) continue;
            cell.textContent = c.requests ? fmtUsd(c.usd, c.lower_bound) : "–";
            if (c.lower_bound) cell.title = "some responses have no price: a lower bound";
          }
        })
        .catch(() => {});
    }
  }

  // ---------- Session ----------

  function textBlock(cls, text) {
    return el("div", { class: "text " + cls }, text);
  }

  function moreButton(sessionId, i, b, block, render) {
    if (!block.full_chars) return null;
    const btn = el("button", { type: "button", class: "more" }, `Show all (${fmtInt(block.full_chars)} characters)`);
    btn.addEventListener("click", async () => {
      btn.disabled = true;
      try {
        const full = await api(`/api/sessions/${encodeURIComponent(sessionId)}/block/${i}/${b}`);
        render(full);
        btn.remove();
      } catch (e) {
        btn.replaceWith(errorBox(e));
      }
    });
    return btn;
  }

  function imageBlock(sessionId, i, b, block) {
    const holder = el("figure", { class: "image" }, el("figcaption", null, `image (${block.media_type}, ${fmtInt(Math.round(block.bytes / 1024))} KB)`));
    const load = async () => {
      try {
        const full = await api(`/api/sessions/${encodeURIComponent(sessionId)}/block/${i}/${b}`);
        const data = full.source ? full.source.data : full.data;
        const media = full.source ? full.source.media_type : full.media_type;
        holder.prepend(el("img", { src: `data:${media};base64,${data}`, alt: `image ${b + 1} of message ${i}` }));
      } catch (e) {
        holder.append(errorBox(e));
      }
    };
    if ("IntersectionObserver" in window) {
      const io = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) {
          io.disconnect();
          load();
        }
      });
      io.observe(holder);
    } else load();
    return holder;
  }

  function firstLine(s, n) {
    const line = (s || "").split("\n").find((l) => l.trim()) || "";
    return line.length > n ? line.slice(0, n) + "…" : line;
  }

  // A tool call's input as a reader wants it: `key: value` per field, and
  // multi-line strings (code, patches) with their real line breaks.
  function readableInput(text) {
    let v;
    try {
      v = JSON.parse(text);
    } catch (_) {
      return text; // a patch or a plain string (possibly cut short)
    }
    if (!v || typeof v !== "object" || Array.isArray(v)) return typeof v === "string" ? v : JSON.stringify(v, null, 2);
    return Object.entries(v)
      .map(([k, x]) => {
        if (typeof x === "string") return x.includes("\n") ? `${k}:\n${x.replace(/^/gm, "  ")}` : `${k}: ${x}`;
        return `${k}: ${JSON.stringify(x, null, 2)}`;
      })
      .join("\n");
  }

  function toolSummary(block) {
    let input = block.input || "";
    try {
      const v = JSON.parse(input);
      if (v && typeof v === "object") {
        const key = ["file_path", "filePath", "path", "command", "cmd", "pattern", "query", "url", "description", "prompt"].find((k) => v[k]);
        if (key) input = Array.isArray(v[key]) ? v[key].join(" ") : String(v[key]);
      }
    } catch (_) {
      /* not JSON: a patch or a plain string */
    }
    return firstLine(input, 120);
  }

  function renderSession(data, params) {
    const gen = generation;
    const id = data.id;
    setTitle(data.title || id);
    const msgs = data.messages;
    const total = () => Math.max(msgs.length, data.count || 0);
    const messageCount = () => fmtInt(total()) + (data.inherited ? ` (${fmtInt(data.inherited)} inherited)` : "");

    // Tool results by call id, so each call shows its result beside it.
    const results = new Map();
    for (const m of msgs) {
      m.blocks.forEach((b, bi) => {
        if (b.type === "tool_result") results.set(b.tool_use_id, { m, b, bi });
      });
    }
    const calls = new Set();
    for (const m of msgs) for (const b of m.blocks) if (b.type === "tool_use") calls.add(b.id);
    const subagents = new Map();
    const forksAt = new Map();
    for (const c of data.children) {
      if (c.tool_use_id) subagents.set(c.tool_use_id, c);
      if (c.at_message !== null && c.at_message !== undefined && c.relation !== "subagent") {
        if (!forksAt.has(c.at_message)) forksAt.set(c.at_message, []);
        forksAt.get(c.at_message).push(c);
      }
    }

    const head = el(
      "header",
      { class: "session-head" },
      el("h1", null, data.title || id),
      el(
        "dl",
        { class: "meta" },
        el("dt", null, "Agent"), el("dd", null, data.agent),
        el("dt", null, "Project"), el("dd", { title: data.project }, data.project || "–"),
        el("dt", null, "Model"), el("dd", null, data.model || "–"),
        el("dt", null, "Started"), el("dd", null, fmtTime(data.created_at)),
        el("dt", null, "Messages"), el("dd", { class: "msg-count" }, messageCount()),
        el("dt", null, "Tokens"), el("dd", null, data.usage ? fmtInt(sumUsage(data.usage)) : "–"),
        el("dt", null, "Id"), el("dd", { class: "mono" }, id)
      ),
      data.parent
        ? el("p", { class: "lineage" }, `${data.parent.relation} of `, el("a", { href: sessionUrl(data.parent.id) }, data.parent.id))
        : null,
      data.children.length
        ? el(
            "details",
            { class: "children" },
            el("summary", null, `${data.children.length} fork${data.children.length > 1 ? "s" : ""} / subagent${data.children.length > 1 ? "s" : ""}`),
            el("ul", null, data.children.map((c) => el("li", null, el("span", { class: "badge rel-" + c.relation }, c.relation), el("a", { href: sessionUrl(c.id) }, c.title || c.id))))
          )
        : null,
      el(
        "nav",
        { class: "tabs", "aria-label": "Session views" },
        el("a", { href: sessionUrl(id), "aria-current": "page" }, "Conversation"),
        el("a", { href: sessionUrl(id, "/changes") }, "Changes")
      ),
      el("p", { class: "hint" }, "Keys: j / k next / previous message, o open or close its tool calls.")
    );
    const status = el("p", { class: "progress", role: "status", "aria-live": "polite" });
    const liveNote = el("p", { class: "live-note", role: "status", "aria-live": "polite" });
    const list = el("section", { class: "conversation", "aria-label": "Conversation", "aria-busy": "true" });
    main.append(head, status, list, liveNote);

    function messageNode(m) {
      const onlyResults = m.blocks.length > 0 && m.blocks.every((b) => b.type === "tool_result" && calls.has(b.tool_use_id));
      if (onlyResults) {
        // Shown beside their calls; this anchor keeps deep links working.
        return el("div", { class: "msg-anchor", id: "m-" + m.i, "data-seq": m.seq, "data-result-of": m.blocks[0].tool_use_id });
      }
      const own = m.i >= data.inherited;
      const head = el(
        "div",
        { class: "msg-head" },
        el("span", { class: "role" }, m.role),
        m.model ? el("span", { class: "model" }, m.model) : null,
        m.timestamp ? el("time", { datetime: m.timestamp }, fmtTime(m.timestamp)) : null,
        m.usage ? el("span", { class: "usage", title: "tokens of this response" }, fmtTokens(sumUsage(m.usage)) + " tok") : null,
        el("a", { class: "anchor", href: own && m.seq !== null ? `#seq-${m.seq}` : `#m-${m.i}`, title: "Link to this message" }, own && m.seq !== null ? `seq ${m.seq}` : `#${m.i}`)
      );
      const body = el("div", { class: "msg-body" });
      m.blocks.forEach((b, bi) => body.append(blockNode(m, b, bi)));
      return el("article", { class: "msg role-" + m.role + (own ? "" : " inherited"), id: "m-" + m.i, "data-seq": m.seq, tabindex: "-1", "aria-label": `${m.role} message ${m.i}` }, head, body);
    }

    function blockNode(m, b, bi) {
      switch (b.type) {
        case "text": {
          const t = textBlock("", b.text);
          return el("div", null, t, moreButton(id, m.i, bi, b, (full) => (t.textContent = full.text)));
        }
        case "thinking": {
          const t = textBlock("thinking", b.text);
          return el("details", { class: "thinking" }, el("summary", null, "Thinking"), t, moreButton(id, m.i, bi, b, (full) => (t.textContent = full.text)));
        }
        case "tool_use": {
          const res = results.get(b.id);
          const input = el("pre", { class: "code" }, readableInput(b.input));
          const sub = subagents.get(b.id);
          const resultPane = res
            ? el(
                "div",
                { class: "result" + (res.b.is_error ? " is-error" : "") },
                el("div", { class: "pane-title" }, res.b.is_error ? "Result (error)" : "Result"),
                (() => {
                  const pre = el("pre", { class: "code" }, res.b.content);
                  return el("div", null, pre, moreButton(id, res.m.i, res.bi, res.b, (full) => (pre.textContent = full.content)));
                })()
              )
            : el("div", { class: "result pending" }, el("div", { class: "pane-title" }, "No result recorded"));
          return el(
            "details",
            { class: "tool" + (res && res.b.is_error ? " failed" : ""), id: "call-" + b.id, "data-call": b.id },
            el("summary", null, el("span", { class: "tool-name" }, b.name), " ", el("span", { class: "tool-arg" }, toolSummary(b)), res && res.b.is_error ? el("span", { class: "badge warn" }, "error") : null),
            el(
              "div",
              { class: "tool-panes" },
              el("div", { class: "call" }, el("div", { class: "pane-title" }, "Call"), input, moreButton(id, m.i, bi, b, (full) => (input.textContent = readableInput(typeof full.input === "string" ? full.input : JSON.stringify(full.input))))),
              resultPane
            ),
            sub ? el("p", { class: "subagent" }, "Subagent session: ", el("a", { href: sessionUrl(sub.id) }, sub.title || sub.id)) : null
          );
        }
        case "tool_result": {
          const pre = el("pre", { class: "code" }, b.content);
          return el("details", { class: "tool orphan" }, el("summary", null, "Tool result", b.is_error ? " (error)" : ""), pre, moreButton(id, m.i, bi, b, (full) => (pre.textContent = full.content)));
        }
        case "image":
          return imageBlock(id, m.i, bi, b);
        default: {
          const pre = el("pre", { class: "code" }, b.text || "");
          return el("details", { class: "tool" }, el("summary", null, "Unknown block"), pre);
        }
      }
    }

    function dividersBefore(i) {
      const out = [];
      if (data.inherited && i === 0) out.push(el("div", { class: "divider" }, "Inherited from ", el("a", { href: sessionUrl(data.parent ? data.parent.id : "") }, data.parent ? data.parent.id : "the parent"), ` (${fmtInt(data.inherited)} messages)`));
      if (data.inherited && i === data.inherited) out.push(el("div", { class: "divider own" }, "This session starts here"));
      if (msgs[i].compaction) out.push(el("div", { class: "divider compaction", role: "separator" }, "Context compacted: the summary below replaced the earlier messages"));
      for (const c of forksAt.get(i) || []) out.push(el("div", { class: "divider fork" }, `${c.relation === "rewind" ? "Rewound" : "Forked"} here → `, el("a", { href: sessionUrl(c.id) }, c.title || c.id)));
      return out;
    }

    // Messages are drawn in order, CHUNK per frame. A deep link far down
    // first gets light stubs for everything before its neighbourhood, so it
    // lands at once; the stubs are then filled in, frame by frame.
    let rendered = 0; // messages [0, rendered) have a node (real or stub)
    let filled = 0; // stubs [filled, stubbed) still to fill
    let stubbed = 0;
    function realNode(i) {
      const frag = document.createDocumentFragment();
      for (const d of dividersBefore(i)) frag.append(d);
      frag.append(messageNode(msgs[i]));
      return frag;
    }
    function progress() {
      const done = rendered - (stubbed - filled);
      status.textContent = done < total() ? `Showing ${fmtInt(done)} of ${fmtInt(total())} messages…` : "";
      if (done >= total()) list.setAttribute("aria-busy", "false");
    }
    function renderThrough(n) {
      const frag = document.createDocumentFragment();
      for (; rendered < Math.min(n, msgs.length); rendered++) frag.append(realNode(rendered));
      list.append(frag);
      progress();
    }
    function stubThrough(n) {
      const frag = document.createDocumentFragment();
      for (; rendered < Math.min(n, msgs.length); rendered++) frag.append(el("div", { class: "msg-stub", id: "m-" + rendered }));
      stubbed = rendered;
      list.append(frag);
    }
    function fill(i) {
      const stub = document.getElementById("m-" + i);
      if (stub && stub.classList.contains("msg-stub")) stub.replaceWith(realNode(i));
    }
    function fillThrough(n) {
      for (; filled < Math.min(n, stubbed); filled++) fill(filled);
      progress();
    }
    // Message i (and the few before it, where its tool call may be) drawn.
    function ensure(i) {
      renderThrough(i + 1);
      for (let k = Math.max(0, i - 3); k <= i; k++) fill(k);
    }

    // The message a hash names: #seq-N (a record seq of this session) or #m-I.
    function targetIndex() {
      const h = decodeURIComponent(location.hash.slice(1));
      let m;
      if ((m = h.match(/^m-(\d+)$/))) return Number(m[1]);
      if ((m = h.match(/^seq-(\d+)$/))) {
        const seq = Number(m[1]);
        for (let i = data.inherited; i < msgs.length; i++) if (msgs[i].seq === seq) return i;
        let best = -1;
        for (let i = data.inherited; i < msgs.length; i++) if (msgs[i].seq !== null && msgs[i].seq <= seq) best = i;
        return best >= 0 ? best : null;
      }
      return null;
    }

    const terms = (params.get("q") || "")
      .toLowerCase()
      .split(/[^\p{L}\p{N}_]+/u)
      .filter((t) => t.length > 1);

    function land() {
      const i = targetIndex();
      if (i === null || i >= msgs.length) return;
      ensure(i);
      for (const old of list.querySelectorAll(".hit")) old.classList.remove("hit");
      let node = document.getElementById("m-" + i);
      if (node && node.dataset.resultOf) {
        const call = document.getElementById("call-" + node.dataset.resultOf);
        if (call) node = call;
      }
      if (!node) return;
      for (const d of node.matches("details") ? [node] : node.querySelectorAll("details")) {
        if (!terms.length || d.textContent.toLowerCase().includes(terms[0]) || d === node) d.open = true;
      }
      node.classList.add("hit");
      if (terms.length) highlight(node, terms);
      node.scrollIntoView({ block: "center" });
      const focusable = node.matches("details") ? node.querySelector("summary") : node;
      focusable.focus({ preventScroll: true });
      current = i;
    }

    const first = targetIndex();
    let current = first === null ? -1 : first;
    if (first !== null && first > CHUNK) stubThrough(first - 20);
    renderThrough(first === null ? CHUNK : first + CHUNK);
    if (first !== null) land();
    let drawing = false; // the drawing loop is scheduled
    const step = () => {
      drawing = false;
      if (gen !== generation) return;
      if (filled < stubbed) fillThrough(filled + CHUNK);
      else if (rendered < msgs.length) renderThrough(rendered + CHUNK);
      else return;
      drawing = true;
      requestAnimationFrame(step);
    };
    const draw = () => {
      if (!drawing) {
        drawing = true;
        requestAnimationFrame(step);
      }
    };
    draw();
    window.onhashchange = () => gen === generation && land();

    // j / k: next / previous message; o: open or close its tool calls.
    const visible = () => [...list.querySelectorAll("article.msg")];
    window.onkeydown = (ev) => {
      if (gen !== generation || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement && document.activeElement.tagName)) return;
      const nodes = visible();
      if (!nodes.length) return;
      let at = nodes.findIndex((n) => Number(n.id.slice(2)) >= current);
      if (ev.key === "j" || ev.key === "k") {
        ev.preventDefault();
        if (at < 0) at = ev.key === "j" ? -1 : nodes.length;
        else if (Number(nodes[at].id.slice(2)) !== current) at = ev.key === "j" ? at - 1 : at;
        const next = nodes[Math.max(0, Math.min(nodes.length - 1, at + (ev.key === "j" ? 1 : -1)))];
        if (ev.key === "j" && rendered < msgs.length && next === nodes[nodes.length - 1]) renderThrough(rendered + CHUNK);
        current = Number(next.id.slice(2));
        for (const n of list.querySelectorAll(".current")) n.classList.remove("current");
        next.classList.add("current");
        next.focus({ preventScroll: true });
        next.scrollIntoView({ block: "nearest" });
      } else if (ev.key === "o" && at >= 0) {
        const node = nodes[at];
        const ds = node.querySelectorAll("details.tool");
        const open = ![...ds].every((d) => d.open);
        for (const d of ds) d.open = open;
      }
    };

    // Live: messages appended while the session is open arrive as
    // Server-Sent Events and are drawn in place. The scroll position stays
    // where it is, unless the reader was at the bottom: then it follows.
    let arrived = 0;
    // Messages after those held: the rest of a long session (`bulk`: drawn
    // by the frame loop) or live ones (drawn at once).
    function addMessages(update, bulk) {
      if (update.from !== msgs.length) {
        route(); // out of step with the server: reload the session
        return false;
      }
      const caughtUp = rendered >= msgs.length && filled >= stubbed;
      const redraw = new Set();
      for (const m of update.messages) {
        msgs.push(m);
        m.blocks.forEach((b, bi) => {
          if (b.type === "tool_use") calls.add(b.id);
          if (b.type !== "tool_result") return;
          results.set(b.tool_use_id, { m, b, bi });
          // A result for a call already drawn: redraw that call's message.
          const call = document.getElementById("call-" + b.tool_use_id);
          const article = call && call.closest("article.msg");
          if (article) redraw.add(article);
        });
      }
      for (const article of redraw) {
        const open = [...article.querySelectorAll("details")].map((d) => d.open);
        const fresh = messageNode(msgs[Number(article.id.slice(2))]);
        fresh.querySelectorAll("details").forEach((d, k) => (d.open = !!open[k]));
        article.replaceWith(fresh);
      }
      if (bulk) draw();
      else if (caughtUp) renderThrough(msgs.length); // else the drawing loop gets them
      head.querySelector(".msg-count").textContent = messageCount();
      return true;
    }
    function appendLive(update) {
      if (gen !== generation) return;
      const doc = document.documentElement;
      const atBottom = window.innerHeight + window.scrollY >= doc.scrollHeight - 24;
      if (!addMessages(update, false)) return;
      arrived += update.messages.length;
      liveNote.textContent = `${fmtInt(arrived)} new message${arrived === 1 ? "" : "s"} since the page opened`;
      if (atBottom) window.scrollTo(0, doc.scrollHeight);
    }
    function follow() {
      if (gen !== generation) return;
      const source = new EventSource("/api/sessions/" + encodeURIComponent(id) + "/events?from=" + msgs.length);
      liveSource = source;
      source.addEventListener("messages", (ev) => appendLive(JSON.parse(ev.data)));
      source.addEventListener("reset", () => gen === generation && route());
      source.addEventListener("gone", () => {
        source.close();
        if (gen === generation) liveNote.textContent = "This session can no longer be read.";
      });
    }
    // A long session came in part: the rest in one more request, drawn by
    // the frame loop; then live updates from where it ends.
    if (msgs.length < total()) {
      api("/api/sessions/" + encodeURIComponent(id) + "?from=" + msgs.length)
        .then((rest) => {
          if (gen !== generation || !addMessages(rest, true)) return;
          if (targetIndex() !== null && current < 0) land();
          follow();
        })
        .catch((e) => gen === generation && status.replaceChildren(errorBox(e)));
    } else follow();
  }

  function sumUsage(u) {
    return (u.input_tokens || 0) + (u.output_tokens || 0) + (u.cache_read_input_tokens || 0) + (u.cache_creation_input_tokens || 0);
  }

  // Wrap each occurrence of `terms` in the text of `root` in <mark>.
  function highlight(root, terms) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    const re = new RegExp("(" + terms.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|") + ")", "giu");
    for (const n of nodes) {
      const text = n.nodeValue;
      if (!re.test(text)) continue;
      re.lastIndex = 0;
      const frag = document.createDocumentFragment();
      let last = 0;
      for (const m of text.matchAll(re)) {
        frag.append(text.slice(last, m.index), el("mark", null, m[0]));
        last = m.index + m[0].length;
      }
      frag.append(text.slice(last));
      n.replaceWith(frag);
    }
  }

  async function viewSession(id, params) {
    const gen = generation;
    setTitle(id);
    main.append(el("p", { class: "loading" }, "Loading session…"));
    let data;
    try {
      // A deep link (#seq-N, #m-I) needs every message to find its target;
      // otherwise the first FIRST come at once and the rest after.
      const deep = /^#(seq|m)-/.test(location.hash);
      data = await api("/api/sessions/" + encodeURIComponent(id) + (deep ? "" : "?limit=" + FIRST));
    } catch (e) {
      if (gen !== generation) return;
      main.replaceChildren(errorBox(e));
      return;
    }
    if (gen !== generation) return;
    main.replaceChildren();
    renderSession(data, params);
  }

  // ---------- Changes ----------

  async function viewChanges(id) {
    const gen = generation;
    setTitle("Changes");
    let data;
    try {
      data = await api("/api/sessions/" + encodeURIComponent(id) + "/changes");
    } catch (e) {
      main.append(errorBox(e));
      return;
    }
    if (gen !== generation) return;
    setTitle("Changes · " + (data.title || id));
    main.append(
      el(
        "header",
        { class: "session-head" },
        el("h1", null, data.title || id),
        el(
          "nav",
          { class: "tabs", "aria-label": "Session views" },
          el("a", { href: sessionUrl(id) }, "Conversation"),
          el("a", { href: sessionUrl(id, "/changes"), "aria-current": "page" }, "Changes")
        )
      )
    );
    if (!data.files.length) {
      main.append(el("p", { class: "empty" }, "No file edits found in this session's tool calls."));
      return;
    }
    const total = data.files.reduce((a, f) => [a[0] + f.added, a[1] + f.removed], [0, 0]);
    main.append(
      el("p", { class: "summary" }, `${data.files.length} file${data.files.length > 1 ? "s" : ""} changed, `, el("span", { class: "added" }, `+${total[0]}`), " ", el("span", { class: "removed" }, `−${total[1]}`)),
      el("ul", { class: "file-index" }, data.files.map((f, fi) => el("li", null, el("a", { href: "#file-" + fi }, f.path), " ", el("span", { class: "added" }, `+${f.added}`), " ", el("span", { class: "removed" }, `−${f.removed}`))))
    );
    data.files.forEach((f, fi) => {
      const blame = "/blame?" + new URLSearchParams({ path: f.path, session: id }).toString();
      const sec = el(
        "section",
        { class: "file", id: "file-" + fi, "aria-label": f.path },
        el("div", { class: "file-head" }, el("h2", null, f.path), el("a", { class: "blame-link", href: blame, title: "every recorded edit of this file, in every session" }, "who wrote it"))
      );
      for (const c of f.changes) {
        const where = c.message >= data.inherited && c.seq !== null && c.seq !== undefined ? `#seq-${c.seq}` : `#m-${c.message}`;
        const link = el("a", { href: sessionUrl(id, where) }, `message ${c.message}`);
        const head = el(
          "div",
          { class: "change-head" },
          el("span", { class: "badge kind-" + c.kind }, c.kind),
          ` ${c.tool} · `,
          link,
          c.moved_to ? ` · moved to ${c.moved_to}` : "",
          c.message < data.inherited ? el("span", { class: "badge" }, "inherited") : null,
          c.failed ? el("span", { class: "badge warn", title: "the tool reported an error: the file may be unchanged" }, "failed") : null
        );
        const rows = el("tbody");
        for (const h of c.hunks) {
          if (h.anchor) rows.append(el("tr", { class: "anchor" }, el("td", { class: "op" }, "@@"), el("td", null, h.anchor)));
          for (const l of h.lines) {
            const cls = l.op === "+" ? "add" : l.op === "-" ? "del" : "ctx";
            rows.append(el("tr", { class: cls }, el("td", { class: "op" }, l.op === " " ? "" : l.op), el("td", null, el("code", null, l.text))));
          }
        }
        sec.append(el("div", { class: "change" + (c.failed ? " failed" : "") }, head, el("table", { class: "diff" }, el("caption", { class: "sr-only" }, `${c.kind} of ${f.path}`), rows)));
      }
      main.append(sec);
    });
  }

  // ---------- Blame: who wrote a file ----------

  async function viewBlame(params) {
    const gen = generation;
    const path = params.get("path") || "";
    const from = params.get("session") || "";
    setTitle("Blame · " + path);
    main.append(el("h1", null, "Who wrote ", el("code", null, path)));
    let data;
    try {
      const q = new URLSearchParams({ path });
      if (from) q.set("session", from);
      data = await api("/api/blame?" + q.toString());
    } catch (e) {
      if (gen === generation) main.append(errorBox(e));
      return;
    }
    if (gen !== generation) return;
    const at = (e) => sessionUrl(e.session, e.seq !== null && e.seq !== undefined ? `#seq-${e.seq}` : `#m-${e.message}`);
    const last = data.edits.find((e) => !e.failed);
    if (data.path !== path) main.append(el("p", { class: "summary" }, el("code", null, data.path)));
    if (last) {
      main.append(
        el(
          "p",
          { class: "summary last-writer" },
          "Last written by ",
          el("a", { href: sessionUrl(last.session) }, last.title || last.session),
          ", ",
          el("a", { href: at(last) }, `message ${last.message}`),
          ` (${last.tool}, ${fmtTime(last.time)})`
        )
      );
    }
    const rows = data.edits.map((e) =>
      el(
        "tr",
        { class: e.failed ? "failed" : null },
        el("td", null, fmtTime(e.time)),
        el("td", null, el("a", { href: sessionUrl(e.session) }, e.title || e.session)),
        el("td", null, el("a", { class: "blame-message", href: at(e) }, `message ${e.message}`)),
        el("td", null, e.tool),
        el("td", null, el("span", { class: "badge kind-" + e.kind }, e.kind), e.failed ? el("span", { class: "badge warn" }, "failed") : null),
        el("td", { class: "num" }, el("span", { class: "added" }, `+${e.added}`), " ", el("span", { class: "removed" }, `−${e.removed}`))
      )
    );
    main.append(
      el(
        "table",
        { class: "blame" },
        el("caption", null, `${data.edits.length} recorded edit${data.edits.length === 1 ? "" : "s"}, newest first (${data.sessions_read} session${data.sessions_read === 1 ? "" : "s"} read)`),
        el("thead", null, el("tr", null, ["When", "Session", "Message", "Tool", "Kind", "Lines"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", null, rows)
      )
    );
  }

  // ---------- Search ----------

  function marked(snippet) {
    // Highlights are byte ranges of the UTF-8 text.
    const bytes = new TextEncoder().encode(snippet.text);
    const dec = new TextDecoder();
    const out = [];
    let at = 0;
    for (const [s, e] of snippet.highlights || []) {
      out.push(dec.decode(bytes.slice(at, s)), el("mark", null, dec.decode(bytes.slice(s, e))));
      at = e;
    }
    out.push(dec.decode(bytes.slice(at)));
    return out;
  }

  async function viewSearch(params) {
    setTitle("Search");
    const p = (k) => params.get(k) || "";
    const form = el("form", { class: "filters search", role: "search", "aria-label": "Search every session" });
    const results = el("div", { class: "results", "aria-live": "polite" });
    main.append(el("h1", null, "Search"), form, results);
    const qInput = el("input", { id: "f-q", name: "q", type: "search", value: p("q"), placeholder: "words, \"a phrase\"", autocomplete: "off" });
    form.append(el("div", { class: "field wide" }, el("label", { for: "f-q" }, "Search all sessions"), qInput));
    const f = await facets().catch(() => ({ agents: {}, projects: {} }));
    form.append(
      el("div", { class: "field" }, selectOf("agent", "Agent", Object.entries(f.agents || {}), p("agent"))),
      el("div", { class: "field" }, selectOf("project", "Project", Object.entries(f.projects || {}), p("project"))),
      el(
        "div",
        { class: "field" },
        el("label", { for: "f-role" }, "Role"),
        el("select", { id: "f-role", name: "role" }, ["", "user", "assistant", "tool", "system"].map((r) => el("option", { value: r, selected: r === p("role") }, r || "any")))
      ),
      el("div", { class: "field" }, input("tool", "Tool", p("tool"))),
      el("div", { class: "field" }, input("since", "From", p("since"), "date")),
      el("div", { class: "field" }, input("until", "To", p("until"), "date"))
    );
    let seq = 0;
    const gen = generation;
    const run = async () => {
      // A late event (the box losing focus as a hit is clicked) must not
      // touch the next view.
      if (gen !== generation) return;
      const q = new URLSearchParams();
      for (const e of form.elements) if (e.name && e.value) q.set(e.name, e.value);
      history.replaceState(null, "", "/search?" + q.toString());
      if (!qInput.value.trim()) {
        results.replaceChildren(el("p", { class: "hint" }, "Type to search every message of every session."));
        return;
      }
      const mine = ++seq;
      let r;
      try {
        r = await api("/api/search?" + q.toString());
      } catch (e) {
        if (mine === seq) results.replaceChildren(errorBox(e));
        return;
      }
      if (mine !== seq) return;
      if (!r.hits.length) {
        results.replaceChildren(el("p", { class: "empty" }, "Nothing matched."));
        return;
      }
      results.replaceChildren(
        el("p", { class: "count" }, `${r.hits.length} hit${r.hits.length > 1 ? "s" : ""}`),
        el(
          "ol",
          { class: "hits" },
          r.hits.map((h) =>
            el(
              "li",
              { class: "hit-item" },
              el("a", { class: "hit-link", href: sessionUrl(h.session, `?q=${encodeURIComponent(qInput.value)}#seq-${h.seq}`) }, h.title || h.session),
              el("div", { class: "hit-meta" }, `${h.agent} · ${shortProject(h.project)} · ${fmtTime(h.time)} · ${h.role}`, h.tools && h.tools.length ? ` · ${h.tools.join(", ")}` : ""),
              el("p", { class: "snippet" }, marked(h.snippet))
            )
          )
        )
      );
    };
    const later = debounce(run, 200);
    form.addEventListener("input", later);
    form.addEventListener("change", later);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      run();
    });
    run();
    qInput.focus();
  }

  // ---------- Usage ----------

  async function viewUsage(params) {
    setTitle("Usage");
    const gen = generation;
    const p = (k) => params.get(k) || "";
    const by = p("by") || "day";
    const metric = p("metric") || "tokens";
    const form = el("form", { class: "filters", "aria-label": "Usage options" });
    form.append(
      el(
        "div",
        { class: "field" },
        el("label", { for: "f-by" }, "Group by"),
        el("select", { id: "f-by", name: "by" }, [["day", "day"], ["week", "week"], ["month", "month"], ["block", "5-hour block"], ["model", "model"], ["project", "project"], ["agent", "agent"]].map(([v, l]) => el("option", { value: v, selected: v === by }, l)))
      ),
      el(
        "div",
        { class: "field" },
        el("label", { for: "f-metric" }, "Chart"),
        el("select", { id: "f-metric", name: "metric" }, [["tokens", "tokens"], ["cost", "cost (USD)"]].map(([v, l]) => el("option", { value: v, selected: v === metric }, l)))
      ),
      el("div", { class: "field" }, input("since", "From", p("since"), "date")),
      el("div", { class: "field" }, input("until", "To", p("until"), "date"))
    );
    form.addEventListener("change", () => {
      const q = new URLSearchParams();
      for (const e of form.elements) if (e.name && e.value) q.set(e.name, e.value);
      navigate("/usage?" + q.toString(), true);
    });
    const body = el("div", { class: "usage" }, el("p", { class: "loading" }, "Counting…"));
    main.append(el("h1", null, "Usage"), form, body);
    const q = new URLSearchParams();
    q.set("by", by);
    for (const k of ["since", "until", "agent", "project", "model"]) if (p(k)) q.set(k, p(k));
    let r;
    try {
      r = await api("/api/usage?" + q.toString());
    } catch (e) {
      body.replaceChildren(errorBox(e));
      return;
    }
    if (gen !== generation) return;
    const t = r.total;
    body.replaceChildren(
      el(
        "div",
        { class: "cards" },
        card("Total tokens", fmtTokens(t.total_tokens), fmtInt(t.total_tokens)),
        card("Cost", fmtUsd(t.cost_usd, t.cost_is_lower_bound), t.cost_is_lower_bound ? `${fmtInt(t.unpriced_requests)} responses unpriced: a lower bound` : `offline prices of ${(r.prices && r.prices.date) || "the shipped table"}`),
        card("Requests", fmtInt(t.requests), `${fmtInt(r.sessions)} sessions`),
        card("Cache reads", fmtTokens(t.cache_read_tokens), `${fmtTokens(t.input_tokens)} fresh input, ${fmtTokens(t.output_tokens)} output`)
      ),
      chart(r.rows, by, metric),
      usageTable(r.rows, by)
    );
  }

  function card(label, value, note) {
    return el("div", { class: "card" }, el("div", { class: "card-label" }, label), el("div", { class: "card-value" }, value), el("div", { class: "card-note" }, note));
  }

  function rowKey(row, by) {
    const v = row.group[by];
    return v === undefined || v === null ? "(none)" : String(v);
  }

  // A bar chart in plain SVG: vertical bars over time, horizontal bars otherwise.
  function chart(rows, by, metric) {
    const value = (r) => (metric === "cost" ? r.cost_usd : r.total_tokens);
    const fmt = (v) => (metric === "cost" ? fmtUsd(v) : fmtTokens(v));
    if (!rows.length) return el("p", { class: "empty" }, "No usage recorded in this range.");
    const max = Math.max(...rows.map(value), 1e-9);
    const timeSeries = ["day", "week", "month", "block"].includes(by);
    const title = `${metric === "cost" ? "Cost" : "Tokens"} by ${by}`;
    if (timeSeries) {
      const W = 960, H = 260, padL = 64, padB = 40, padT = 16;
      const bw = Math.max(2, Math.min(40, (W - padL - 8) / rows.length - 2));
      const step = (W - padL - 8) / rows.length;
      const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title });
      s.append(svg("title", {}, title));
      for (let g = 0; g <= 4; g++) {
        const y = padT + ((H - padT - padB) * g) / 4;
        s.append(svg("line", { x1: padL, x2: W - 4, y1: y, y2: y, class: "grid" }));
        s.append(svg("text", { x: padL - 6, y: y + 4, "text-anchor": "end", class: "axis" }, fmt(max * (1 - g / 4))));
      }
      const labelEvery = Math.ceil(rows.length / 12);
      rows.forEach((r, i) => {
        const h = ((H - padT - padB) * value(r)) / max;
        const x = padL + i * step + (step - bw) / 2;
        const bar = svg("rect", { x, y: H - padB - h, width: bw, height: Math.max(h, value(r) > 0 ? 1 : 0), class: "bar" });
        bar.append(svg("title", {}, `${rowKey(r, by)}: ${fmt(value(r))}`));
        s.append(bar);
        if (i % labelEvery === 0) s.append(svg("text", { x: x + bw / 2, y: H - padB + 16, "text-anchor": "middle", class: "axis" }, rowKey(r, by)));
      });
      return el("figure", { class: "chart-wrap" }, s, el("figcaption", null, title));
    }
    const sorted = [...rows].sort((a, b) => value(b) - value(a)).slice(0, 20);
    const W = 960, rowH = 26, padL = 280;
    const H = sorted.length * rowH + 8;
    const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title });
    s.append(svg("title", {}, title));
    sorted.forEach((r, i) => {
      const y = 4 + i * rowH;
      const w = ((W - padL - 110) * value(r)) / max;
      const key = rowKey(r, by);
      const label = by === "project" ? shortProject(key) || key : key;
      s.append(svg("text", { x: padL - 8, y: y + 17, "text-anchor": "end", class: "axis" }, label.length > 40 ? label.slice(0, 39) + "…" : label));
      const bar = svg("rect", { x: padL, y: y + 4, width: Math.max(w, value(r) > 0 ? 1 : 0), height: rowH - 8, class: "bar" });
      bar.append(svg("title", {}, `${key}: ${fmt(value(r))}`));
      s.append(bar);
      s.append(svg("text", { x: padL + w + 6, y: y + 17, class: "axis" }, fmt(value(r))));
    });
    return el("figure", { class: "chart-wrap" }, s, el("figcaption", null, title));
  }

  function usageTable(rows, by) {
    return el(
      "div",
      { class: "table-wrap" },
      el(
        "table",
        { class: "usage-table" },
        el("caption", { class: "sr-only" }, `Usage by ${by}`),
        el(
          "thead",
          null,
          el("tr", null, el("th", { scope: "col" }, by), ["Requests", "Input", "Output", "Cache read", "Cache write", "Total", "Cost"].map((h) => el("th", { scope: "col", class: "num" }, h)))
        ),
        el(
          "tbody",
          null,
          rows.map((r) =>
            el(
              "tr",
              null,
              el("th", { scope: "row", title: rowKey(r, by) }, by === "project" ? shortProject(rowKey(r, by)) || rowKey(r, by) : rowKey(r, by)),
              [r.requests, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens, r.total_tokens].map((v) => el("td", { class: "num" }, fmtInt(v))),
              el("td", { class: "num" }, fmtUsd(r.cost_usd, r.cost_is_lower_bound))
            )
          )
        )
      )
    );
  }

  // Keyboard: "/" focuses the search box of the view (or opens Search).
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "/" || /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement && document.activeElement.tagName)) return;
    ev.preventDefault();
    const box = document.querySelector('input[type="search"]');
    if (box) box.focus();
    else navigate("/search");
  });

  facets().catch(() => {});
  route();
})();

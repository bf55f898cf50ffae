/**
 * The dashboard's stylesheet and client script as string modules, so the compiled binary carries them (no CDN, no
 * build step at run time, no second toolchain). The script is small on purpose: pages are rendered on the server and
 * work without it; it adds live refresh, paging a long trace on scroll, the live trace over SSE, folding a tool
 * call's output under its call, and j/k through ATIF steps.
 */

/** The stylesheet: system fonts, high-contrast text, a visible focus ring, status shown in words with a shape. */
export const CSS = `
:root { color-scheme: light dark; --fg:#111; --bg:#fff; --mut:#555; --line:#ccc; --acc:#0b57d0; --ok:#0a6b2d; --bad:#a40e26; --warn:#8a5300; --chip:#f2f2f2 }
@media (prefers-color-scheme: dark) { :root { --fg:#eee; --bg:#121212; --mut:#b0b0b0; --line:#444; --acc:#8ab4f8; --ok:#7ee2a0; --bad:#ff9aa8; --warn:#ffd27a; --chip:#222 } }
* { box-sizing: border-box }
body { margin:0; font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif; color:var(--fg); background:var(--bg) }
header.top { display:flex; gap:1.5rem; align-items:center; padding:.6rem 1rem; border-bottom:1px solid var(--line) }
header.top a { color:var(--fg); text-decoration:none; font-weight:600 }
header.top a[aria-current=page] { text-decoration:underline }
header.top form.logout { margin-left:auto }
main { padding:1rem; max-width:1400px; overflow-x:auto }
a { color:var(--acc) }
:focus-visible { outline:3px solid var(--acc); outline-offset:2px }
table { border-collapse:collapse; width:100%; margin:.5rem 0 1rem }
th, td { text-align:left; padding:.3rem .5rem; border-bottom:1px solid var(--line); vertical-align:top }
th { font-weight:600 }
thead th { font-size:.85rem; text-transform:uppercase; letter-spacing:.03em }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums }
.mut { color:var(--mut) }
.status { font-weight:600; white-space:nowrap }
.status.ok::before { content:"✓ " } .status.bad::before { content:"✗ " } .status.live::before { content:"● " } .status.warn::before { content:"! " }
.status.ok { color:var(--ok) } .status.bad { color:var(--bad) } .status.warn { color:var(--warn) } .status.live { color:var(--acc) }
form.filters { display:flex; flex-wrap:wrap; gap:.5rem 1rem; align-items:end; margin-bottom:1rem }
form.filters label { display:flex; flex-direction:column; font-size:.85rem }
input, select, button { font:inherit; padding:.25rem .4rem; color:var(--fg); background:var(--bg); border:1px solid var(--mut); border-radius:3px }
button { cursor:pointer }
dl.band { display:grid; grid-template-columns:max-content 1fr; gap:.2rem 1rem; margin:0 0 1rem }
dl.band dt { font-weight:600 }
nav.tabs { display:flex; gap:1rem; border-bottom:1px solid var(--line); margin:1rem 0 .5rem }
nav.tabs a { padding:.3rem 0 }
section { margin-bottom:1.5rem }
pre { white-space:pre-wrap; word-break:break-word; background:var(--chip); padding:.5rem; border-radius:3px; max-height:32rem; overflow:auto }
ol.trace { list-style:none; padding:0; margin:0 }
ol.trace > li { border-left:3px solid var(--line); padding:.2rem .6rem; margin:.2rem 0 }
ol.trace > li .kind { font-size:.75rem; text-transform:uppercase; color:var(--mut); margin-right:.5rem }
ol.trace > li.thought { font-style:italic }
ol.trace > li.tool { border-left-color:var(--acc) }
ol.trace > li.error { border-left-color:var(--bad) }
.timing { display:flex; width:100%; border:1px solid var(--line); min-height:2.2rem; margin:.5rem 0 }
.timing > div { border-right:1px solid var(--bg); background:var(--chip); padding:.2rem .3rem; font-size:.8rem; overflow:hidden; white-space:nowrap; min-width:3.5rem }
.step { border:1px solid var(--line); border-radius:4px; padding:.5rem; margin:.4rem 0 }
.step[aria-current=true] { border-color:var(--acc); border-width:2px }
.diff .add { background:rgba(10,107,45,.15) } .diff .del { background:rgba(164,14,38,.15) }
.diff code { display:block; white-space:pre-wrap }
.counts { display:flex; flex-wrap:wrap; gap:.5rem 1.25rem; margin:.5rem 0 }
.sr-only { position:absolute; width:1px; height:1px; overflow:hidden; clip:rect(0 0 0 0) }
`;

/** The client script (plain ES2020, no modules, no dependencies). */
export const JS = `
(function () {
  "use strict";
  // live refresh: an element with data-refresh is re-fetched every 2 s while its data-live is "1"
  function refresh(el) {
    if (el.getAttribute("data-live") !== "1") return;
    setTimeout(function () {
      fetch(el.getAttribute("data-refresh"), { headers: { accept: "text/html" } })
        .then(function (r) { el.setAttribute("data-live", r.headers.get("x-live") === "1" ? "1" : "0"); return r.text(); })
        .then(function (t) { el.innerHTML = t; refresh(el); })
        .catch(function () { refresh(el); });
    }, 2000);
  }
  document.querySelectorAll("[data-refresh]").forEach(refresh);

  // a tool call's output, printed where it arrived, moves under its call
  function fold(list) {
    list.querySelectorAll("li[data-result-for]").forEach(function (li) {
      var call = list.querySelector('details[data-call="' + CSS.escape(li.getAttribute("data-result-for")) + '"]');
      if (!call) return;
      var body = li.querySelector(".result");
      if (body) call.appendChild(body);
      var st = li.getAttribute("data-status");
      var s = call.querySelector("summary .tstatus");
      if (s && st) s.textContent = st;
      li.remove();
    });
  }

  var trace = document.getElementById("trace");
  if (trace) {
    fold(trace);
    var base = trace.getAttribute("data-base");
    var more = document.getElementById("trace-more");
    var busy = false;
    var after = function () { return trace.getAttribute("data-after"); };
    var append = function (html) {
      var tmp = document.createElement("ol");
      tmp.innerHTML = html;
      while (tmp.firstChild) trace.appendChild(tmp.firstChild);
      var last = trace.querySelector("li[data-seq]:last-of-type");
      var all = trace.querySelectorAll("li[data-seq]");
      if (all.length) trace.setAttribute("data-after", all[all.length - 1].getAttribute("data-seq"));
      fold(trace);
    };
    var live = function () {
      if (trace.getAttribute("data-live") !== "1" || !window.EventSource) return;
      var es = new EventSource(base + "/stream?after=" + encodeURIComponent(after()));
      es.onmessage = function (e) { append(e.data); };
      es.addEventListener("end", function () { es.close(); trace.setAttribute("data-live", "0"); var s = document.getElementById("trace-state"); if (s) s.textContent = "settled"; });
    };
    var page = function () {
      if (busy || trace.getAttribute("data-more") !== "1") return;
      busy = true;
      fetch(base + "/events?after=" + encodeURIComponent(after()))
        .then(function (r) { trace.setAttribute("data-more", r.headers.get("x-more") === "1" ? "1" : "0"); return r.text(); })
        .then(function (t) {
          append(t);
          busy = false;
          if (trace.getAttribute("data-more") !== "1") { if (more) more.hidden = true; live(); }
        })
        .catch(function () { busy = false; });
    };
    if (more) {
      more.addEventListener("click", function (e) { e.preventDefault(); page(); });
      if (window.IntersectionObserver) new IntersectionObserver(function (es) { if (es[0].isIntersecting) page(); }).observe(more);
    }
    if (trace.getAttribute("data-more") !== "1") live();
  }

  // ATIF steps: j / ArrowDown next, k / ArrowUp previous (roving focus, aria-current on the step shown)
  var steps = Array.prototype.slice.call(document.querySelectorAll("#steps .step"));
  if (steps.length) {
    var at = 0;
    var go = function (i) {
      if (i < 0 || i >= steps.length) return;
      steps[at].setAttribute("tabindex", "-1"); steps[at].removeAttribute("aria-current");
      at = i;
      steps[at].setAttribute("tabindex", "0"); steps[at].setAttribute("aria-current", "true");
      steps[at].focus();
      var pos = document.getElementById("step-pos");
      if (pos) pos.textContent = "step " + (at + 1) + " of " + steps.length;
    };
    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT") || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === "j" || e.key === "ArrowDown") { e.preventDefault(); go(at + 1); }
      else if (e.key === "k" || e.key === "ArrowUp") { e.preventDefault(); go(at - 1); }
    });
    steps.forEach(function (s, i) { s.addEventListener("focus", function () { if (i !== at) go(i); }); });
  }
})();
`;

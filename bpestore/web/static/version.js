// One version: what it is, its compression curve, its tokens (searchable, as
// `vocab --grep`) and its merges (paged).
"use strict";

const ref = param("ref");
const PAGE = 100;
let mergeStart = 0;

function infoTable(v) {
  const rows = [
    ["status", v.status], ["tokens", fmt(v.vocab_size)], ["merges", fmt(v.n_merges)],
    ["corpus", v.corpus === null ? "-" : (v.corpus_generation === null ? v.corpus : v.corpus + "@" + v.corpus_generation)],
    ["parent", v.parent || "-"], ["aliases", v.aliases.join(", ") || "-"],
    ["fingerprint", v.fingerprint || "- (not complete)"], ["corpus digest", v.corpus_digest || "-"],
    ["pre-tokenizer", v.spec.pattern || v.spec.pretokenizer], ["tie-break", v.spec.tie_break],
    ["special tokens", (v.spec.special_tokens || []).join(" ") || "-"],
    ["created", v.created_at], ["updated", v.updated_at],
  ];
  return el("table", {className: "info"}, rows.map(([k, value]) =>
    el("tr", {}, el("th", {}, k), el("td", {className: "text"}, String(value)))));
}

async function loadTokens() {
  const where = document.getElementById("tokens");
  const grep = document.getElementById("grep").value;
  try {
    const tokens = await api("vocab", {ref, grep, limit: grep ? 2000 : 500});
    document.getElementById("token-count").textContent = fmt(tokens.length) + (tokens.length >= (grep ? 2000 : 500) ? "+ shown" : " shown");
    where.replaceChildren(el("table", {className: "tokens-table"},
      el("tr", {}, el("th", {className: "num"}, "id"), el("th", {}, "token"), el("th", {className: "num"}, "bytes"),
        el("th", {}, "kind"), el("th", {className: "num"}, "rank"), el("th", {className: "num"}, "pair count")),
      tokens.map((t) => el("tr", {dataset: {id: t.id}}, el("td", {className: "num"}, t.id),
        el("td", {className: "text"}, el("span", {className: tokenClass(t.id)}, t.token)),
        el("td", {className: "num"}, t.bytes), el("td", {}, t.kind),
        el("td", {className: "num"}, t.rank === null ? "" : fmt(t.rank)), el("td", {className: "num"}, t.count === null ? "" : fmt(t.count))))));
  } catch (error) {
    document.getElementById("token-count").textContent = "";
    showError(where, error);
  }
}

async function loadMerges() {
  const where = document.getElementById("merges");
  try {
    const merges = await api("merges", {ref, start: mergeStart, limit: PAGE});
    document.getElementById("merges-where").textContent = merges.length
      ? "ranks " + fmt(mergeStart) + "–" + fmt(mergeStart + merges.length - 1) : "no merges from rank " + fmt(mergeStart);
    document.getElementById("merges-next").disabled = merges.length < PAGE;
    document.getElementById("merges-prev").disabled = mergeStart === 0;
    where.replaceChildren(el("table", {},
      el("tr", {}, el("th", {className: "num"}, "rank"), el("th", {}, "pair"), el("th", {}, "token"), el("th", {className: "num"}, "id"), el("th", {className: "num"}, "pair count")),
      merges.map((m) => el("tr", {}, el("td", {className: "num"}, fmt(m.rank)),
        el("td", {className: "text"}, el("span", {className: tokenClass(m.left)}, m.pair[0]), " + ", el("span", {className: tokenClass(m.right)}, m.pair[1])),
        el("td", {className: "text"}, el("span", {className: tokenClass(m.token)}, m.text)),
        el("td", {className: "num"}, m.token), el("td", {className: "num"}, fmt(m.count))))));
  } catch (error) {
    showError(where, error);
  }
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// points: [[x, y], ...]; labels: axis names.
function lineChart(points, xLabel, yLabel) {
  const W = 640, H = 300, L = 56, B = 40, T = 12, R = 16;
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const sx = (x) => L + (x1 === x0 ? 0 : (x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - (y1 === y0 ? 0 : (y - y0) / (y1 - y0)) * (H - B - T);
  const chart = svg("svg", {class: "curve", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"});
  chart.append(svg("line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B}),
    svg("line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B}),
    svg("polyline", {class: "line", points: points.map((p) => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" ")}),
    svg("text", {x: L, y: H - B + 16}, fmt(x0)), svg("text", {x: W - R, y: H - B + 16, "text-anchor": "end"}, fmt(x1)),
    svg("text", {x: (L + W) / 2, y: H - 6, "text-anchor": "middle"}, xLabel),
    svg("text", {x: L - 6, y: T + 10, "text-anchor": "end"}, y1.toFixed(2)),
    svg("text", {x: L - 6, y: H - B, "text-anchor": "end"}, y0.toFixed(2)),
    svg("text", {x: 14, y: (T + H - B) / 2, transform: "rotate(-90 14 " + (T + H - B) / 2 + ")", "text-anchor": "middle"}, yLabel));
  return chart;
}

async function loadCurve() {
  const where = document.getElementById("curve");
  try {
    const chart = await api("curve", {ref, points: 60});
    const points = chart.curve.map((p) => [p.merges, p.bytes_per_token]);
    const on = chart.file.endsWith("dracula.txt.xz") ? "the sample text (Dracula)" : chart.file;
    where.replaceChildren(lineChart(points, "merges (first N of " + ref + ")", "bytes per token"),
      el("p", {className: "muted"}, "Bytes per token on " + on + " (" + fmt(chart.bytes) + " bytes) as the " +
        "vocabulary grows along the merge ranks; the whole version: " + chart.bytes_per_token.toFixed(3) + "."));
  } catch (error) {
    where.replaceChildren(el("p", {className: "muted"}, "No compression curve: " + error.message));
  }
}

async function start() {
  nav("/version");
  if (!ref) {
    showError(document.getElementById("info"), new Error("give a version: /version?ref=NAME@N"));
    return;
  }
  try {
    const v = await api("show", {ref});
    document.getElementById("title").textContent = v.ref;
    document.title = v.ref + " · bpestore";
    document.getElementById("info").replaceChildren(infoTable(v),
      el("p", {}, link("/playground", {ref: v.ref}, "Try it in the playground"),
        v.parent ? [" · ", link("/diff", {a: v.parent, b: v.ref}, "diff with " + v.parent)] : null));
  } catch (error) {
    showError(document.getElementById("info"), error);
    return;
  }
  document.getElementById("grep").addEventListener("input", debounce(loadTokens, 250));
  document.getElementById("merges-prev").addEventListener("click", () => { mergeStart = Math.max(0, mergeStart - PAGE); loadMerges(); });
  document.getElementById("merges-next").addEventListener("click", () => { mergeStart += PAGE; loadMerges(); });
  loadCurve();
  loadTokens();
  loadMerges();
}

start();

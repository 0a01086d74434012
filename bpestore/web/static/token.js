// One token of a version: what it is, the merge tree that built it; and how the
// version cuts a text (`explain`): each word's merges step by step.
"use strict";

const refSelect = document.getElementById("ref");
const tokenInput = document.getElementById("token");

function treeNode(node) {
  const span = tokenSpan(node.token, {id: node.id});
  const head = el("span", {}, span, " ", el("a", {href: "/token?" + new URLSearchParams({ref: refSelect.value, id: node.id})}, "id " + node.id),
    node.rank !== undefined ? el("span", {className: "muted"}, " · merge rank " + fmt(node.rank) +
      (node.count && !imported() ? " · pair count " + fmt(node.count) : "")) : el("span", {className: "muted"}, " · base"));
  return el("li", {}, head, node.parts ? el("ul", {className: "tree"}, node.parts.map(treeNode)) : null);
}

let versions = [];

// An imported version was not trained here: it has no pair counts (the store's 0s are none).
function imported() {
  const v = versions.find((o) => o.ref === refSelect.value);
  return Boolean(v && v.source !== "trained");
}

async function lookup(event) {
  if (event) event.preventDefault();
  const where = document.getElementById("result");
  const value = tokenInput.value;
  if (!value) { where.replaceChildren(el("p", {className: "muted"}, "Type a token's text or its id.")); return; }
  loading(where);
  const byId = document.getElementById("by").value === "id";
  const query = {ref: refSelect.value, token: value, id: byId ? "1" : null};
  history.replaceState(null, "", "?" + new URLSearchParams(byId ? {ref: refSelect.value, id: value} : {ref: refSelect.value, token: value}));
  try {
    const t = await api("token", query);
    document.title = "token " + t.id + " of " + refSelect.value + " · bpestore";
    where.replaceChildren(facts([
      ["token", tokenSpan(t.token, {id: t.id})], ["id", String(t.id)], ["kind", t.kind],
      ["bytes", el("code", {}, (t.bytes.match(/../g) || []).join(" "))],
      ["merge rank", t.rank === undefined || t.rank === null ? "-" : fmt(t.rank)],
      imported() ? null : ["pair count", t.count === undefined || t.count === null ? "-" : fmt(t.count)]].filter(Boolean)),
    el("h2", {}, "Merge tree"), el("ul", {className: "tree root merge-tree"}, treeNode(t)));
  } catch (error) {
    showError(where, error);
    const text = document.getElementById("explain-text");
    if (error.status === 404 && !byId && !text.value) {  // not a token: how the version cuts it instead
      text.value = value;
      explain();
    }
  }
}

async function explain(event) {
  if (event) event.preventDefault();
  const where = document.getElementById("explain");
  const text = document.getElementById("explain-text").value;
  if (!text) { where.replaceChildren(); return; }
  loading(where);
  try {
    const e = await api("explain", undefined, {ref: refSelect.value, text});
    const chips = (ids) => colourTokens(ids.map((id) => tokenSpan(e.tokens[id], {id})));
    put(where, el("p", {}, fmt(e.ids.length) + " tokens: "), el("div", {className: "chips explained"}, chips(e.ids)),
      e.words.map((w) => el("details", {className: "word"}, el("summary", {}, el("code", {}, JSON.stringify(w.text)),
        " → " + fmt(w.ids.length) + (w.ids.length === 1 ? " token" : " tokens") + ", " + fmt(w.steps.length) + (w.steps.length === 1 ? " merge" : " merges")),
      table(["step#", "merge rank#", "pair", "after"], w.steps.map((s, i) => [String(i + 1), fmt(s.rank),
        el("span", {}, ...chips([s.left, s.right]).flatMap((c, k) => (k ? [" + ", c] : [c]))),
        el("div", {className: "chips"}, chips(s.ids))])))));
  } catch (error) {
    showError(where, error);
  }
}

async function start() {
  nav(null);
  document.getElementById("toggles").replaceWith(displayToggles());
  try {
    versions = await versionSelect(refSelect, param("ref"));
  } catch (error) {
    showError(document.getElementById("result"), error);
    return;
  }
  tokenInput.value = param("id") !== null ? param("id") : param("token") || "";
  // What was typed, as a token shows it: a leading space or a tab is seen, not guessed.
  const shown = () => put(document.getElementById("token-shown"),
    tokenInput.value && document.getElementById("by").value === "text" ? tokenSpan(tokenInput.value) : null);
  tokenInput.addEventListener("input", shown);
  document.getElementById("by").addEventListener("change", shown);
  shown();
  document.getElementById("by").value = param("id") !== null ? "id" : "text";
  document.getElementById("lookup").addEventListener("submit", lookup);
  document.getElementById("explain-form").addEventListener("submit", explain);
  refSelect.addEventListener("change", () => { lookup(); explain(); });
  if (param("text") !== null) document.getElementById("explain-text").value = param("text");
  lookup();
  explain();
}

start();

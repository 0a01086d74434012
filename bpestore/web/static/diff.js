// The diff of two versions: shared merge prefix, changed ids, the tokens only on each side.
"use strict";

const LIMIT = 500;

function chips(tokens) {
  const shown = tokens.slice(0, LIMIT).map((t) => el("span", {className: "tok tok-c7"}, t));
  return el("div", {className: "chips"}, shown,
    tokens.length > LIMIT ? el("span", {className: "muted"}, "+" + fmt(tokens.length - LIMIT) + " more") : null);
}

async function show(a, b) {
  const where = document.getElementById("diff");
  where.replaceChildren(el("p", {className: "muted"}, "Loading…"));
  try {
    const d = await api("diff", {a, b});
    const specRows = Object.entries(d.spec_changes).map(([name, [old, now]]) =>
      el("tr", {}, el("td", {}, name), el("td", {className: "text"}, JSON.stringify(old)), el("td", {className: "text"}, JSON.stringify(now))));
    where.replaceChildren(
      el("table", {className: "summary"},
        el("tr", {}, el("th", {}, ""), el("th", {}, a), el("th", {}, b)),
        el("tr", {}, el("td", {}, "tokens"), el("td", {className: "num"}, fmt(d.vocab_size[0])), el("td", {className: "num"}, fmt(d.vocab_size[1]))),
        el("tr", {}, el("td", {}, "merges"), el("td", {className: "num"}, fmt(d.merges[0])), el("td", {className: "num"}, fmt(d.merges[1])))),
      el("p", {}, "shared merge prefix: ", el("strong", {className: "shared"}, fmt(d.shared_merges)), " merges · ids with other bytes: ",
        el("strong", {className: "changed"}, fmt(d.changed_ids.length))),
      specRows.length ? el("table", {}, el("tr", {}, el("th", {}, "spec"), el("th", {}, a), el("th", {}, b)), specRows) : null,
      el("h2", {}, "Only in " + a + " (" + fmt(d.only_a.length) + ")"), el("div", {className: "only-a"}, chips(d.only_a)),
      el("h2", {}, "Only in " + b + " (" + fmt(d.only_b.length) + ")"), el("div", {className: "only-b"}, chips(d.only_b)));
  } catch (error) {
    showError(where, error);
  }
}

async function start() {
  nav("/diff");
  const a = document.getElementById("a"), b = document.getElementById("b");
  try {
    const versions = await versionSelect(a, param("a"));
    await versionSelect(b, param("b") || (versions.length > 1 ? versions[versions.length - 1].ref : null));
    if (!param("a") && versions.length > 1) a.value = versions[versions.length - 2].ref;
  } catch (error) {
    showError(document.getElementById("diff"), error);
    return;
  }
  document.getElementById("form").addEventListener("submit", (event) => {
    event.preventDefault();
    history.replaceState(null, "", "?" + new URLSearchParams({a: a.value, b: b.value}));
    show(a.value, b.value);
  });
  if (a.value && b.value) show(a.value, b.value);
}

start();

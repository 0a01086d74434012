// The playground: each token of the text as a coloured span (its id on hover), the
// token count and bytes per token, updated as you type; one version, or two side by side.
"use strict";

const selectA = document.getElementById("ref-a");
const selectB = document.getElementById("ref-b");
const compare = document.getElementById("compare");
const input = document.getElementById("text");
const panes = document.getElementById("panes");
let generation = 0;

function pane(ref) {
  return el("section", {className: "pane", dataset: {ref}},
    el("h2", {}, ref), el("div", {className: "stats"}, "…"), el("div", {className: "tokens"}));
}

function render(section, result) {
  const spans = result.tokens.map((t) => el("span", {className: tokenClass(t.id), title: "id " + t.id,
    dataset: {id: t.id}}, t.token));
  section.querySelector(".tokens").replaceChildren(...spans);
  section.querySelector(".stats").replaceChildren(
    el("span", {className: "count", dataset: {count: result.count}}, fmt(result.count) + " tokens"), " · ",
    fmt(result.bytes) + " bytes · ",
    el("span", {className: "bpt"}, result.bytes_per_token === null ? "- bytes/token" : result.bytes_per_token.toFixed(2) + " bytes/token"));
  section.dataset.text = input.value;
}

async function update() {
  const mine = ++generation;
  const refs = [selectA.value];
  if (compare.checked && selectB.value) refs.push(selectB.value);
  const sections = refs.map((ref) => panes.querySelector('section[data-ref="' + CSS.escape(ref) + '"]') || pane(ref));
  panes.replaceChildren(...sections);
  const text = input.value;
  await Promise.all(refs.map(async (ref, i) => {
    try {
      const result = await api("encode", undefined, {ref, text});
      if (mine === generation) render(sections[i], result);
    } catch (error) {
      if (mine === generation) showError(sections[i].querySelector(".tokens"), error);
    }
  }));
  if (mine === generation) {
    const query = new URLSearchParams({ref: refs[0]});
    if (refs[1]) query.set("compare", refs[1]);
    history.replaceState(null, "", "?" + query);
  }
}

async function start() {
  nav("/playground");
  try {
    const versions = await versionSelect(selectA, param("ref"));
    const complete = versions.filter((v) => v.status === "complete");
    if (!param("ref") && complete.length) selectA.value = complete[complete.length - 1].ref;
    const other = param("compare");
    await versionSelect(selectB, other || (complete.length > 1 ? complete[complete.length - 2].ref : null));
    if (other) { compare.checked = true; selectB.disabled = false; }
  } catch (error) {
    showError(panes, error);
    return;
  }
  if (param("text") !== null) input.value = param("text");
  const later = debounce(update, 120);
  input.addEventListener("input", later);
  selectA.addEventListener("change", update);
  selectB.addEventListener("change", update);
  compare.addEventListener("change", () => { selectB.disabled = !compare.checked; update(); });
  update();
}

start();

// The playground: each token of the text as a coloured span, the token count and bytes
// per token, updated as you type; one version, or several side by side (any names, baselines
// such as GPT-2 and cl100k included) with the tokens that split the text otherwise than the
// first version's underlined. The text and versions are kept in the URL.
"use strict";

const selectA = document.getElementById("ref-a");
const selectB = document.getElementById("ref-b");
const compare = document.getElementById("compare");
const moreRefs = document.getElementById("more-refs");
const addRef = document.getElementById("add-ref");
let versionList = [];
const input = document.getElementById("text");
const panes = document.getElementById("panes");
const MAX_URL_TEXT = 2000;  // characters of text kept in the URL
let generation = 0;

function pane(ref) {
  const section = el("section", {className: "pane", dataset: {ref}, "aria-label": "tokens of " + ref},
    el("h2", {}, versionLink(ref)), el("div", {className: "stats", role: "status"}, "…"),
    el("div", {className: "tokens", tabindex: "0", "aria-label": "tokens of " + ref + " (arrow keys move between them)"}),
    el("div", {className: "tokinfo", "aria-live": "polite"}),
    el("details", {className: "ids"}, el("summary", {}, "ids"),
      el("label", {className: "visually-hidden", for: "ids-" + ref}, "ids of " + ref),
      el("textarea", {id: "ids-" + ref, readonly: "readonly", rows: "3"}),
      el("button", {type: "button", className: "copy"}, "Copy ids")));
  section.querySelector(".copy").addEventListener("click", async (event) => {
    const area = section.querySelector("details textarea");
    area.select();
    try { await navigator.clipboard.writeText(area.value); event.target.textContent = "Copied"; }
    catch (error) { event.target.textContent = "Select and copy (Ctrl+C)"; }
    setTimeout(() => { event.target.textContent = "Copy ids"; }, 1500);
  });
  return section;
}

function render(section, result) {
  const spans = result.texts.map((text, i) => tokenSpan(text, {id: result.ids[i], running: true}));
  tokenRow(section.querySelector(".tokens"), spans, section.querySelector(".tokinfo"));
  section.querySelector(".stats").replaceChildren(
    el("span", {className: "count", dataset: {count: result.count}}, fmt(result.count) + " tokens"), " · ",
    fmt(result.bytes) + " bytes · ",
    el("span", {className: "bpt"}, result.bytes_per_token === null ? "- bytes/token" : result.bytes_per_token.toFixed(2) + " bytes/token"));
  section.querySelector("details textarea").value = JSON.stringify(result.ids);
  section.dataset.text = input.value;
}

// Each token's place in the text's bytes, "start:end"; null when the tokens do not spell
// the text (a pre-tokenizer that drops spaces).
function places(result) {
  const out = [];
  let at = 0;
  for (const text of result.texts) {
    const end = at + tokenByteLength(text);
    out.push(at + ":" + end);
    at = end;
  }
  return at === result.bytes ? out : null;
}

// Each further version against the first: its token count, and the tokens of either that
// cover other bytes than any token of the other (underlined).
function compareResults(sections, results) {
  const line = document.getElementById("comparison");
  line.replaceChildren();
  if (results.length < 2 || !results[0]) return;
  const cuts = results.map((result) => result && places(result));
  const differs = sections.map(() => new Set());
  const here = cuts[0] && new Set(cuts[0]);
  results.forEach((b, i) => {
    if (i === 0 || !b) return;
    const a = results[0];
    const diff = b.count - a.count;
    const ratio = a.count ? b.count / a.count : null;
    line.append(el("span", {className: "versus"}, sections[i].dataset.ref + " uses ",
      el("strong", {className: "delta", dataset: {delta: diff}}, diff === 0 ? "as many" : (diff > 0 ? fmt(diff) + " more" : fmt(-diff) + " fewer")),
      " tokens than " + sections[0].dataset.ref + " (" + fmt(b.count) + " against " + fmt(a.count) +
      (ratio === null ? "" : ", ×" + ratio.toFixed(3)) + ")."));
    if (!cuts[0] || !cuts[i]) return;
    const there = new Set(cuts[i]);
    let split = 0;
    if (i === 1) cuts[0].forEach((place, k) => { if (!there.has(place)) { differs[0].add(k); split++; } });
    cuts[i].forEach((place, k) => { if (!here.has(place)) differs[i].add(k); });
    if (i === 1) line.append(" " + fmt(split) + " tokens of " + sections[0].dataset.ref + " are split otherwise than by " +
      sections[1].dataset.ref + " (underlined).");
    line.append(" ");
  });
  sections.forEach((section, i) => {
    section.querySelectorAll(".tokens .tok").forEach((span, k) => span.classList.toggle("differs", differs[i].has(k)));
  });
}

// The versions beside the first: the second select, then any added.
function comparedRefs() {
  if (!compare.checked) return [];
  return [selectB.value, ...[...moreRefs.querySelectorAll("select")].map((s) => s.value)].filter(Boolean);
}

// One more version to compare with: a select of every version, and a button that removes it.
async function addVersion(chosen) {
  const n = moreRefs.querySelectorAll("select").length;
  const select = el("select", {id: "ref-more-" + n, "aria-label": "version " + (n + 3)});
  const shown = new Set([selectA.value, ...comparedRefs()]);
  const fresh = versionList.find((v) => v.status === "complete" && !shown.has(v.ref));
  const remove = el("button", {type: "button", className: "remove", "aria-label": "remove this version"}, "×");
  const box = el("span", {className: "more-ref"}, select, remove);
  select.addEventListener("change", update);
  remove.addEventListener("click", () => { box.remove(); update(); });
  moreRefs.append(box);
  await versionSelect(select, chosen || (fresh || {}).ref, versionList);
}

async function update() {
  const mine = ++generation;
  const refs = [...new Set([selectA.value, ...comparedRefs()])];
  const sections = refs.map((ref) => panes.querySelector('section[data-ref="' + CSS.escape(ref) + '"]') || pane(ref));
  panes.replaceChildren(...sections);
  const text = input.value;
  const results = await Promise.all(refs.map(async (ref, i) => {
    try {
      const result = await api("encode", undefined, {ref, text, compact: "1"});
      if (mine === generation) render(sections[i], result);
      return result;
    } catch (error) {
      if (mine === generation) {
        showError(sections[i].querySelector(".tokens"), error);
        sections[i].querySelector(".stats").textContent = "";
      }
      return null;
    }
  }));
  if (mine !== generation) return;
  compareResults(sections, results);
  const query = new URLSearchParams({ref: refs[0]});
  for (const ref of refs.slice(1)) query.append("compare", ref);
  if (text.length <= MAX_URL_TEXT) query.set("text", text);
  history.replaceState(null, "", "?" + query);
  panes.dataset.updated = String(mine);
}

// The version to show first: the URL's, else the newest one aliased prod, else the
// newest complete one.
function defaultRef(versions) {
  const complete = versions.filter((v) => v.status === "complete");
  const newest = (list) => list.reduce((a, v) => (!a || v.created_at > a.created_at ? v : a), null);
  const prod = newest(complete.filter((v) => v.aliases.includes("prod")));
  return prod ? prod.ref : (newest(complete) || {}).ref;
}

async function start() {
  nav("/playground");
  document.getElementById("toggles").replaceWith(displayToggles());
  try {
    const versions = await versionSelect(selectA, param("ref"));
    if (!param("ref") && versions.length) selectA.value = defaultRef(versions);
    versionList = versions;
    const [other, ...more] = new URLSearchParams(window.location.search).getAll("compare");
    const rest = versions.filter((v) => v.status === "complete" && v.ref !== selectA.value);
    await versionSelect(selectB, other || (rest.length ? defaultRef(rest) : null), versions);
    if (other) { compare.checked = true; selectB.disabled = false; addRef.disabled = false; }
    for (const ref of more) await addVersion(ref);
    if (!versions.length) {
      panes.replaceChildren(el("p", {className: "muted"}, "No versions yet: bpestore train NAME --corpus C --vocab-size N"));
      return;
    }
  } catch (error) {
    showError(panes, error);
    return;
  }
  if (param("text") !== null) input.value = param("text");
  input.addEventListener("input", debounce(update, 120));
  selectA.addEventListener("change", update);
  selectB.addEventListener("change", update);
  compare.addEventListener("change", () => {
    selectB.disabled = addRef.disabled = !compare.checked;
    moreRefs.hidden = !compare.checked;
    update();
  });
  addRef.addEventListener("click", async () => { await addVersion(); update(); });
  update();
}

start();

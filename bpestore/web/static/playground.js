// The playground: each token of the text as a coloured span, the token count and bytes
// per token, updated as you type; one version, or two side by side with the tokens that
// split the text differently underlined. The text and versions are kept in the URL.
"use strict";

const selectA = document.getElementById("ref-a");
const selectB = document.getElementById("ref-b");
const compare = document.getElementById("compare");
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

function compareResults(sections, results) {
  const line = document.getElementById("comparison");
  if (results.length < 2 || !results[0] || !results[1]) { line.textContent = ""; return; }
  const [a, b] = results;
  const diff = b.count - a.count;
  const ratio = a.count ? b.count / a.count : null;
  line.replaceChildren(sections[1].dataset.ref + " uses ",
    el("strong", {className: "delta", dataset: {delta: diff}}, diff === 0 ? "as many" : (diff > 0 ? fmt(diff) + " more" : fmt(-diff) + " fewer")),
    " tokens than " + sections[0].dataset.ref + " (" + fmt(b.count) + " against " + fmt(a.count) +
    (ratio === null ? "" : ", ×" + ratio.toFixed(3)) + ").");
  const cuts = results.map(places);
  if (!cuts[0] || !cuts[1]) return;
  let differing = 0;
  results.forEach((result, i) => {
    const other = new Set(cuts[1 - i]);
    const spans = sections[i].querySelectorAll(".tokens > .tok");
    cuts[i].forEach((place, k) => {
      const same = other.has(place);
      spans[k].classList.toggle("differs", !same);
      if (!same && i === 0) differing++;
    });
  });
  line.append(" " + fmt(differing) + " tokens of " + sections[0].dataset.ref + " are split otherwise (underlined).");
}

async function update() {
  const mine = ++generation;
  const refs = [selectA.value];
  if (compare.checked && selectB.value) refs.push(selectB.value);
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
  if (refs[1]) query.set("compare", refs[1]);
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
    const other = param("compare");
    const rest = versions.filter((v) => v.status === "complete" && v.ref !== selectA.value);
    await versionSelect(selectB, other || (rest.length ? defaultRef(rest) : null), versions);
    if (other) { compare.checked = true; selectB.disabled = false; }
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
  compare.addEventListener("change", () => { selectB.disabled = !compare.checked; update(); });
  update();
}

start();

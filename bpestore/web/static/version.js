// One version: every field of its spec, its compression curve (on a text the reader
// picks, overlaid with the other versions of its name), its tokens (sorted, searched,
// paged) and its merges (paged).
"use strict";

const ref = param("ref");
const PAGE = 100;
let version = null;
let tokenStart = 0, mergeStart = 0;
const tokenPager = pager("token pages"), mergePager = pager("merge pages");

function infoTable(v) {
  return el("div", {className: "columns"}, facts([
    ["status", v.status], ["source", v.source], ["tokens", fmt(v.vocab_size)], ["merges", fmt(v.n_merges)],
    ["target", v.target_vocab_size !== null ? fmt(v.target_vocab_size) + " tokens" : v.target_merges !== null ? fmt(v.target_merges) + " merges" : "-"],
    ["corpus", v.corpus === null ? "-" : corpusLink(v.corpus, v.corpus_generation)],
    ["parent", v.parent ? versionLink(v.parent) : "-"],
    ["aliases", v.aliases.length ? v.aliases.map((a) => el("code", {}, v.name + "@" + a + " ")) : "-"],
    ["min frequency", fmt(v.min_frequency)], ["max token length", v.max_token_length === null ? "-" : fmt(v.max_token_length)],
    ["fingerprint", v.fingerprint ? el("code", {}, v.fingerprint) : "- (not complete)"],
    ["corpus digest", v.corpus_digest ? el("code", {}, v.corpus_digest) : "-"],
    ["created", when(v.created_at)], ["updated", when(v.updated_at)],
  ]), specFacts(v.spec));
}

function tokenLink(t) {
  return el("a", {href: "/token?" + new URLSearchParams({ref, id: t.id})}, t.id);
}

async function loadTokens() {
  const where = document.getElementById("tokens");
  const search = document.getElementById("grep").value;
  const kind = document.getElementById("search-kind").value;
  const order = document.getElementById("order").value;
  try {
    const tokens = await api("vocab", {ref, order, start: tokenStart, limit: PAGE, [kind]: search || null});
    tokenPager.show(tokenStart, tokens.length, PAGE);
    const spans = tokens.map((t) => tokenSpan(t.token, {id: t.id}));
    if (!tokens.length) {
      put(where, el("p", {className: "muted"}, search ? "No token matches." : "No tokens here."));
      return;
    }
    where.replaceChildren(table(["id#", "token", "bytes#", "kind", "rank#", "pair count#"],
      tokens.map((t, i) => Object.assign([tokenLink(t), spans[i], t.bytes, t.kind, t.rank === null ? "" : fmt(t.rank),
        t.count === null ? "" : fmt(t.count)], {dataset: {id: t.id}})), {className: "tokens-table"}));
  } catch (error) {
    tokenPager.where.textContent = "";
    showError(where, error);
  }
}

async function loadMerges() {
  const where = document.getElementById("merges");
  try {
    const merges = await api("merges", {ref, start: mergeStart, limit: PAGE});
    mergePager.show(mergeStart, merges.length, PAGE, version.n_merges);
    where.replaceChildren(table(["rank#", "pair", "token", "id#", "pair count#"], merges.map((m) => {
      const pair = colourTokens([tokenSpan(m.pair[0], {id: m.left}), tokenSpan(m.pair[1], {id: m.right})]);
      return [fmt(m.rank), el("span", {className: "text"}, pair[0], " + ", pair[1]), tokenSpan(m.text, {id: m.token}),
        tokenLink({id: m.token}), fmt(m.count)];
    }), {className: "merges-table"}));
  } catch (error) {
    showError(where, error);
  }
}

let family = [];  // the complete versions of this version's name, oldest first

async function loadCurve(event) {
  if (event) event.preventDefault();
  scoreCard(document.getElementById("score"), family.length ? family : [ref], document.getElementById("curve-text").value,
    version.ref);
  const where = document.getElementById("curve");
  loading(where);
  const text = document.getElementById("curve-text").value;
  const refs = [ref, ...[...document.querySelectorAll("#overlay input:checked")].map((i) => i.value)];
  const results = await Promise.all(refs.map((r) => (text
    ? api("curve", undefined, {ref: r, text, points: 60, per_rank: "0"})
    : api("curve", {ref: r, points: 60, per_rank: "0"})).catch((error) => ({error, ref: r}))));
  const good = results.filter((c) => !c.error);
  const failed = results.filter((c) => c.error).map((c) => el("p", {className: "error", role: "alert"},
    "No compression curve for " + c.ref + ": " + c.error.message +
    (text ? "" : " (type a text above to measure on it)")));
  if (!good.length) { where.replaceChildren(...failed); return; }
  const on = text ? "your text" : "the sample text shipped with bpestore";
  where.replaceChildren(
    lineChart(good.map((c) => ({name: c.ref, points: c.curve.map((p) => [p.merges, p.bytes_per_token])})),
      "merges", "bytes per token", 3),
    el("p", {className: "muted"}, "Bytes per token on " + on + " (" + fmt(good[0].bytes) + " bytes) as the " +
      "vocabulary grows along the merge ranks; the whole version: " +
      good.map((c) => c.ref + " " + c.bytes_per_token.toFixed(3)).join(", ") + "."),
    ...failed);
}

async function overlayChoices(v) {
  const all = await api("versions", {name: v.name});
  family = all.filter((o) => o.status === "complete" || o.ref === v.ref).sort((a, b) => a.number - b.number).map((o) => o.ref);
  const others = all.filter((o) => o.ref !== v.ref && o.status === "complete");
  if (!others.length) return;
  put(document.getElementById("overlay"), el("span", {className: "muted"}, "overlay:"),
    others.map((o) => el("label", {}, el("input", {type: "checkbox", value: o.ref}), " " + o.ref)));
}

async function start() {
  nav(null);
  const info = document.getElementById("info");
  if (!ref) {
    showError(info, new Error("Give a version: /version?ref=NAME@N"));
    return;
  }
  try {
    version = await api("show", {ref});
  } catch (error) {
    document.getElementById("title").textContent = ref;
    showError(info, error);
    info.append(el("p", {}, el("a", {href: "/"}, "All versions")));
    return;
  }
  const v = version;
  document.getElementById("title").textContent = v.ref + (v.ref !== ref ? " (" + ref + ")" : "");
  document.title = v.ref + " · bpestore";
  info.removeAttribute("role");
  info.replaceChildren(el("p", {}, link("/playground", {ref: v.ref}, "Try it in the playground"),
    v.parent ? [" · ", link("/diff", {a: v.parent, b: v.ref}, "diff with its parent " + v.parent)] : null),
  infoTable(v));
  for (const id of ["curve-section", "tokens-section", "merges-section"]) document.getElementById(id).hidden = false;
  document.getElementById("toggles").replaceWith(displayToggles());
  document.getElementById("token-pager").replaceWith(tokenPager.box);
  document.getElementById("merge-pager").replaceWith(mergePager.box);
  const reload = () => { tokenStart = 0; loadTokens(); };
  document.getElementById("grep").addEventListener("input", debounce(reload, 250));
  document.getElementById("order").addEventListener("change", reload);
  document.getElementById("search-kind").addEventListener("change", reload);
  tokenPager.prev.addEventListener("click", () => { tokenStart = Math.max(0, tokenStart - PAGE); loadTokens(); });
  tokenPager.next.addEventListener("click", () => { tokenStart += PAGE; loadTokens(); });
  mergePager.prev.addEventListener("click", () => { mergeStart = Math.max(0, mergeStart - PAGE); loadMerges(); });
  mergePager.next.addEventListener("click", () => { mergeStart += PAGE; loadMerges(); });
  document.getElementById("curve-form").addEventListener("submit", loadCurve);
  await overlayChoices(v).catch(() => {});
  loadCurve();
  loadTokens();
  loadMerges();
}

start();

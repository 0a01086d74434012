// One version: every field of its spec, its compression curve (on a text the reader
// picks, overlaid with the other versions of its name), its tokens (sorted, searched,
// paged) and its merges (paged).
"use strict";

const ref = param("ref");
const PAGE = 100;
let version = null;
let tokenStart = 0, mergeStart = 0;
const tokenPager = pager("token pages"), mergePager = pager("merge pages");

// An imported version was not trained here: no pair counts, minimum frequency, tie break
// or target to show (the store's defaults in those fields are not facts about it).
function imported(v) {
  return v.source !== "trained";
}

function infoTable(v, status) {
  const trained = !imported(v);
  const spec = {...v.spec};
  if (!trained) delete spec.tie_break;
  return el("div", {className: "columns"}, facts([
    ["status", el("span", {className: "badge status " + status}, status)], ["source", v.source],
    ["tokens", fmt(v.vocab_size)], ["merges", fmt(v.n_merges)],
    trained ? ["target", v.target_vocab_size !== null ? fmt(v.target_vocab_size) + " tokens" : v.target_merges !== null ? fmt(v.target_merges) + " merges" : "-"] : null,
    ["corpus", v.corpus === null ? "-" : corpusLink(v.corpus, v.corpus_generation)],
    ["parent", v.parent ? versionLink(v.parent) : "-"],
    ["aliases", v.aliases.length ? v.aliases.map((a) => el("code", {}, v.name + "@" + a + " ")) : "-"],
    trained ? ["min frequency", fmt(v.min_frequency)] : null,
    trained ? ["max token length", v.max_token_length === null ? "-" : fmt(v.max_token_length)] : null,
    ["fingerprint", v.fingerprint ? el("code", {}, v.fingerprint) : "- (not complete)"],
    trained ? ["corpus digest", v.corpus_digest ? el("code", {}, v.corpus_digest) : "-"] : null,
    ["created", when(v.created_at)], ["updated", when(v.updated_at)],
  ].filter((row) => row !== null)), specFacts(spec));
}

// An unfinished version's progress, polled: merges, rate, time left; stalled with the
// command that resumes it; the page reloads once the version is complete.
const POLL_MS = Number(param("poll")) || 2000;

async function watchProgress() {
  const where = document.getElementById("progress");
  try {
    const p = await api("progress", {ref: version.ref, last: 6});
    if (p.status === "complete") { location.reload(); return; }
    const status = statusOf(version, p);
    put(where, progressBlock(p));
    where.dataset.status = status;
    for (const [label, value] of [["tokens", fmt(p.vocab_size)], ["merges", fmt(p.merges)]]) {  // the facts grow too
      const th = [...document.querySelectorAll("#info table.info th")].find((h) => h.textContent === label);
      if (th) th.nextElementSibling.textContent = value;
    }
    const badge = document.querySelector("#info .badge.status");
    if (badge) { badge.textContent = status; badge.className = "badge status " + status; }
  } catch (error) {
    showError(where, error);
  }
  setTimeout(watchProgress, POLL_MS);
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
    tokenPager.show(tokenStart, tokens.length, PAGE, search ? undefined : version.vocab_size);
    keepInUrl();
    const spans = tokens.map((t) => tokenSpan(t.token, {id: t.id}));
    if (!tokens.length) {
      put(where, el("p", {className: "muted"}, search ? "No token matches." : "No tokens here."));
      return;
    }
    const counted = !imported(version);
    where.replaceChildren(table(["id#", "token", "bytes#", "kind", "rank#", ...(counted ? ["pair count#"] : [])],
      tokens.map((t, i) => Object.assign([tokenLink(t), spans[i], t.bytes, t.kind, t.rank === null ? "" : fmt(t.rank),
        ...(counted ? [t.count ? fmt(t.count) : "-"] : [])], {dataset: {id: t.id}})), {className: "tokens-table stack"}));
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
    keepInUrl();
    const counted = !imported(version);
    where.replaceChildren(table(["rank#", "pair", "token", "id#", ...(counted ? ["pair count#"] : [])], merges.map((m) => {
      const pair = colourTokens([tokenSpan(m.pair[0], {id: m.left}), tokenSpan(m.pair[1], {id: m.right})]);
      return [fmt(m.rank), el("span", {className: "pair"}, pair[0], " + ", pair[1]), tokenSpan(m.text, {id: m.token}),
        tokenLink({id: m.token}), ...(counted ? [m.count ? fmt(m.count) : "-"] : [])];
    }), {className: "merges-table stack"}));
  } catch (error) {
    showError(where, error);
  }
}

let family = [];  // the complete versions of this version's name, oldest first

// The token list's order and search and both pages, kept in the URL.
function keepInUrl() {
  const query = new URLSearchParams({ref});
  const search = document.getElementById("grep").value, order = document.getElementById("order").value;
  if (order !== "rank") query.set("order", order);
  if (search) { query.set(document.getElementById("search-kind").value, search); }
  if (tokenStart) query.set("tokens_at", String(tokenStart));
  if (mergeStart) query.set("merges_at", String(mergeStart));
  history.replaceState(null, "", "?" + query);
}

function chosen() {
  return [...document.querySelectorAll("#overlay input:checked")].map((i) => i.value);
}

async function loadCurve(event) {
  if (event) event.preventDefault();
  const text = document.getElementById("curve-text").value;
  const others = chosen();
  scoreCard(document.getElementById("score"), [...new Set([...family, ref, ...others])], text, version.ref,
    document.getElementById("eval-set").value);
  const where = document.getElementById("curve");
  loading(where);
  // A version that does not segment by merges (longest match) has no curve along merge ranks: not asked.
  const segmentation = (version.spec || {}).segmentation || "merge";
  const refs = segmentation === "merge" ? [ref, ...others] : others;
  const results = await Promise.all(refs.map((r) => (text
    ? api("curve", undefined, {ref: r, text, points: 60, per_rank: "0"})
    : api("curve", {ref: r, points: 60, per_rank: "0"})).catch((error) => ({error, ref: r}))));
  if (segmentation !== "merge") results.unshift({error: new Error("it segments by " + segmentation +
    " (the longest piece first), not along merge ranks"), ref});
  const good = results.filter((c) => !c.error);
  const failed = results.filter((c) => c.error).map((c) => el("p", {className: "muted note"},
    "No compression curve for " + c.ref + ": " + c.error.message));
  if (!good.length) { where.replaceChildren(...failed); return; }
  const on = text ? "your text" : HELD_OUT;
  where.replaceChildren(
    lineChart(good.map((c) => ({name: c.ref, points: c.curve.map((p) => [p.merges, p.bytes_per_token])})),
      "merges", "bytes per token", 3),
    el("p", {className: "muted"}, "Bytes per token on " + on + " (" + fmt(good[0].bytes) + " bytes) as the " +
      "vocabulary grows along the merge ranks; the whole version: " +
      good.map((c) => c.ref + " " + c.bytes_per_token.toFixed(3)).join(", ") + "."),
    ...failed);
}

// Any other complete version, of any name (baselines such as GPT-2 too), can be put
// beside this one on the score card and the curve; those of its own name are on the card.
async function overlayChoices(v) {
  const all = await api("versions");
  family = all.filter((o) => o.name === v.name && (o.status === "complete" || o.ref === v.ref))
    .sort((a, b) => a.number - b.number).map((o) => o.ref);
  const others = all.filter((o) => o.ref !== v.ref && o.status === "complete");
  if (!others.length) return;
  const wanted = new Set((param("with") || "").split(",").filter(Boolean));
  put(document.getElementById("overlay"), el("span", {className: "muted"}, "beside it:"),
    others.map((o) => el("label", {}, el("input", {type: "checkbox", value: o.ref, checked: wanted.has(o.ref) ? "checked" : null}), " " + o.ref)));
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
  infoTable(v, v.status));
  if (v.status !== "complete") {
    info.append(el("div", {id: "progress", "aria-live": "polite"}));
    watchProgress();
  }
  for (const id of ["curve-section", "tokens-section", "merges-section"]) document.getElementById(id).hidden = false;
  document.getElementById("toggles").replaceWith(displayToggles());
  document.getElementById("token-pager").replaceWith(tokenPager.box);
  document.getElementById("merge-pager").replaceWith(mergePager.box);
  const reload = () => { tokenStart = 0; loadTokens(); };
  document.getElementById("grep").addEventListener("input", debounce(reload, 250));
  document.getElementById("order").addEventListener("change", reload);
  document.getElementById("search-kind").addEventListener("change", reload);
  tokenPager.onPage = (at) => { tokenStart = at; loadTokens(); };
  mergePager.onPage = (at) => { mergeStart = at; loadMerges(); };
  if (param("order")) document.getElementById("order").value = param("order");
  for (const kind of ["grep", "prefix"]) {
    if (param(kind) !== null) { document.getElementById("search-kind").value = kind; document.getElementById("grep").value = param(kind); }
  }
  tokenStart = Math.max(0, Number(param("tokens_at")) || 0);
  mergeStart = Math.max(0, Number(param("merges_at")) || 0);
  tokenPager.prev.addEventListener("click", () => { tokenStart = Math.max(0, tokenStart - PAGE); loadTokens(); });
  tokenPager.next.addEventListener("click", () => { tokenStart += PAGE; loadTokens(); });
  mergePager.prev.addEventListener("click", () => { mergeStart = Math.max(0, mergeStart - PAGE); loadMerges(); });
  mergePager.next.addEventListener("click", () => { mergeStart += PAGE; loadMerges(); });
  document.getElementById("curve-form").addEventListener("submit", loadCurve);
  // The facts and lists first (the page's first render), then the measures, which may
  // have to load the tokenizers.
  loading(document.getElementById("score"));
  loading(document.getElementById("curve"));
  const lists = Promise.all([loadMerges(), loadTokens()]);
  const choices = overlayChoices(v).catch(() => {});  // asked beside the lists: the curve waits on them
  evalSets(document.getElementById("eval-set")).then(() => document.getElementById("eval-set").addEventListener("change", loadCurve));
  await lists;
  drawn();
  await choices;
  loadCurve();
}

start();

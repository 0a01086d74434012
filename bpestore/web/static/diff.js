// The diff of two versions, as a review reads it: what changed in numbers and spec, the
// merges each has that the other has not (with their pair counts where the version
// counted them), the ids whose bytes changed (both sides), and the tokens only on each
// side (by rank, or another order, searched). One request (`diff_view`) draws every
// section; a page, an order or a search asks again for what it changes. Order, search
// and pages are kept in the URL.
"use strict";

const PAGE = 100;
const SECTIONS = ["new_merges", "removed_merges", "changed_ids", "only_a", "only_b"];
const ORDERS = [["rank", "by rank (merge order)"], ["bytes", "by bytes"], ["longest", "longest first"], ["id", "by id"]];
let view = null;  // {a, b, order, q, at: {section: start}}

function specCell(value) {
  if (value === null || value === undefined || (Array.isArray(value) && !value.length)) return el("span", {className: "muted"}, "none");
  if (Array.isArray(value)) return value.map((x) => el("code", {}, String(x))).flatMap((c) => [c, " "]).slice(0, -1);
  if (typeof value === "object") return Object.entries(value).map(([k, v]) => el("code", {}, k + ": " + v)).flatMap((c) => [c, " "]).slice(0, -1);
  return el("code", {}, String(value));
}

function chip(t) {
  return tokenSpan(t.token, {id: t.id});
}

function mergeTable(ref, merges) {
  const counted = merges.some((m) => m.count !== null);
  const head = ["rank#", "pair", "token", "id#", ...(counted ? ["pair count#"] : [])];
  return table(head, merges.map((m) => {
    const pair = colourTokens([tokenSpan(m.pair[0], {id: m.left}), tokenSpan(m.pair[1], {id: m.right})]);
    return [fmt(m.rank), el("span", {className: "pair"}, pair[0], " + ", pair[1]), tokenSpan(m.text, {id: m.token}),
      link("/token", {ref, id: m.token}, String(m.token)), ...(counted ? [m.count === null ? "-" : fmt(m.count)] : [])];
  }), {className: "merge-list stack"});
}

function sectionItems(d, name, page) {
  if (!page.items.length) return el("p", {className: "muted"}, view.q && name.startsWith("only") ? "No token matches." : "None.");
  if (name === "new_merges") return mergeTable(d.b.ref, page.items);
  if (name === "removed_merges") return mergeTable(d.a.ref, page.items);
  if (name === "changed_ids") {
    return table(["id#", d.a.ref, d.b.ref], page.items.map((c) => Object.assign(
      [link("/token", {ref: d.b.ref, id: c.id}, String(c.id)), tokenSpan(c.a, {id: c.id}), tokenSpan(c.b, {id: c.id})],
      {dataset: {id: c.id}})), {className: "changed stack"});
  }
  return el("div", {className: "chips", role: "list"}, colourTokens(page.items.map(chip)));
}

function sectionTitle(d, name) {
  return {new_merges: "Merges only in " + d.b.ref, removed_merges: "Merges only in " + d.a.ref, changed_ids: "Changed ids",
    only_a: "Tokens only in " + d.a.ref, only_b: "Tokens only in " + d.b.ref}[name];
}

function keepInUrl() {
  const query = new URLSearchParams({a: view.a, b: view.b});
  if (view.order !== "rank") query.set("order", view.order);
  if (view.q) query.set("q", view.q);
  for (const name of SECTIONS) if (view.at[name]) query.set("at_" + name, String(view.at[name]));
  history.replaceState(null, "", "?" + query);
}

function request(sections) {
  const params = {a: view.a, b: view.b, limit: PAGE, order: view.order, q: view.q, section: sections};
  for (const name of sections || SECTIONS) if (view.at[name]) params["at_" + name] = view.at[name];
  return api("diff_view", params);
}

// A section: its heading with the total, a pager (earlier/later, a page number) and the items.
function drawSection(d, name, boxes) {
  const page = d.sections[name];
  const {heading, nav, body} = boxes[name];
  heading.textContent = sectionTitle(d, name) + " (" + fmt(page.total) + (view.q && name.startsWith("only") ? " matching" : "") + ")";
  nav.show(page.start, page.items.length, PAGE, page.total);
  nav.box.hidden = page.total <= PAGE;
  put(body, sectionItems(d, name, page));
  body.removeAttribute("aria-busy");
}

async function reload(d, names, boxes) {
  for (const name of names) {
    boxes[name].body.setAttribute("aria-busy", "true");
    put(boxes[name].body, el("p", {className: "muted", role: "status"}, "Loading…"));
  }
  keepInUrl();
  try {
    const answer = await request(names);
    for (const name of names) drawSection({...d, sections: answer.sections}, name, boxes);
  } catch (error) {
    for (const name of names) showError(boxes[name].body, error);
  }
}

function onlyControls(d, boxes) {
  const order = el("select", {id: "only-order"}, ORDERS.map(([v, label]) => el("option", {value: v, selected: v === view.order ? "selected" : null}, label)));
  const search = el("input", {type: "search", id: "only-q", value: view.q, placeholder: "a part of a token", autocomplete: "off"});
  const again = () => { view.at.only_a = 0; view.at.only_b = 0; reload(d, ["only_a", "only_b"], boxes); };
  order.addEventListener("change", () => { view.order = order.value; again(); });
  search.addEventListener("input", debounce(() => { view.q = search.value; again(); }, 200));
  return el("div", {className: "controls only-controls"}, el("label", {for: "only-order"}, "Tokens only in one: order"), order,
    el("label", {for: "only-q"}, "search"), search);
}

function summary(d) {
  const [va, vb] = [d.a, d.b];
  const specRows = Object.entries(d.spec_changes).map(([name, [old, now]]) => [name.replace(/_/g, " "), specCell(old), specCell(now)]);
  const extension = d.shared_merges === d.merges[0];
  const newMerges = d.merges[1] - d.shared_merges;
  const origin = (v) => (v.source === "trained" ? (v.corpus === null ? "-" : corpusLink(v.corpus, v.corpus_generation)) : "imported (" + v.source + ")");
  return [
    table(["", va.ref, vb.ref], [
      ["tokens", fmt(d.vocab_size[0]), fmt(d.vocab_size[1])],
      ["merges", fmt(d.merges[0]), fmt(d.merges[1])],
      ["corpus", origin(va), origin(vb)],
      ["fingerprint", el("code", {}, (va.fingerprint || "-").slice(0, 12)), el("code", {}, (vb.fingerprint || "-").slice(0, 12))],
    ], {className: "summary"}),
    el("p", {className: "verdict"}, extension
      ? [versionLink(vb.ref), " keeps all ", el("strong", {className: "shared"}, fmt(d.shared_merges)), " merges of ", versionLink(va.ref),
        " and adds " + fmt(newMerges) + "."]
      : ["The first ", el("strong", {className: "shared"}, fmt(d.shared_merges)), " merges are shared; then they part: ",
        fmt(d.counts.new_merges) + " merges only in " + vb.ref + ", " + fmt(d.counts.removed_merges) + " only in " + va.ref + "."]),
    el("p", {}, "ids with other bytes: ", el("strong", {className: "changed"}, fmt(d.counts.changed_ids)),
      d.counts.changed_ids ? " (a text encoded with one is not decoded right by the other)" : " (ids shared by both mean the same bytes)"),
    specRows.length ? [el("h2", {}, "Spec changes"), table(["field", va.ref, vb.ref], specRows, {className: "spec-changes stack"})]
      : el("p", {className: "same-spec"}, "Same spec (pre-tokenizer, normalizer, alphabet, special tokens…)."),
  ];
}

async function show(a, b) {
  const where = document.getElementById("diff");
  where.setAttribute("aria-busy", "true");
  put(where, el("p", {className: "muted", role: "status"}, "Loading… (comparing " + a + " with " + b + ")"));
  keepInUrl();
  let d;
  try {
    d = await request(null);
  } catch (error) {
    where.removeAttribute("aria-busy");
    showError(where, error);
    return;
  }
  const boxes = {};
  const parts = [];
  for (const name of SECTIONS) {
    if (name === "removed_merges" && !d.sections[name].total) continue;
    if (name === "changed_ids" && !d.sections[name].total) continue;
    const nav = pager(sectionTitle(d, name));
    const box = {heading: el("h2", {}), nav, body: el("div", {className: name.replace(/_/g, "-") + " section"})};
    boxes[name] = box;
    const go = (start) => { view.at[name] = Math.max(0, start); reload(d, [name], boxes); };
    nav.prev.addEventListener("click", () => go((view.at[name] || 0) - PAGE));
    nav.next.addEventListener("click", () => go((view.at[name] || 0) + PAGE));
    nav.onPage = go;
    if (name === "only_a") parts.push(onlyControls(d, boxes));
    parts.push(box.heading, nav.box, box.body);
  }
  put(where, summary(d), parts);
  for (const name of Object.keys(boxes)) drawSection(d, name, boxes);
  where.removeAttribute("aria-busy");
  where.dataset.drawn = a + " " + b;
  drawn();
}

// Which two versions: the URL's; b alone: b against its parent; neither: the newest
// version that has a parent, against it (else the two newest).
function defaults(versions) {
  let a = param("a"), b = param("b");
  if (b && !a) a = (versions.find((v) => v.ref === b || v.name + "@" + v.number === b) || {}).parent || null;
  if (!a && !b) {
    const newest = [...versions].sort((x, y) => (x.created_at < y.created_at ? 1 : -1));
    const child = newest.find((v) => v.parent);
    if (child) { a = child.parent; b = child.ref; }
    else if (newest.length > 1) { a = newest[1].ref; b = newest[0].ref; }
  }
  return [a, b];
}

async function start() {
  nav("/diff");
  document.getElementById("toggles").replaceWith(displayToggles());
  const selectA = document.getElementById("a"), selectB = document.getElementById("b");
  const at = {};
  for (const name of SECTIONS) at[name] = Math.max(0, Number(param("at_" + name)) || 0);
  const settings = (a, b) => ({a, b, order: ORDERS.some(([v]) => v === param("order")) ? param("order") : "rank", q: param("q") || "", at});
  const scoreOf = (a, b) => scoreCard(document.getElementById("eval"), [a, b],
    document.getElementById("eval-text").value, a, document.getElementById("eval-set").value);
  // Both versions named in the URL: the diff and the score card are asked at once, beside the version list.
  let shown = null;
  if (param("a") && param("b")) {
    view = settings(param("a"), param("b"));
    shown = show(view.a, view.b);
    scoreOf(view.a, view.b);
  }
  let a, b;
  try {
    const versions = await api("versions");
    [a, b] = defaults(versions);
    if (b && !a) a = (await api("show", {ref: b})).parent;  // b named by an alias
    const stalled = await stalledRefs(versions);
    await versionSelect(selectA, a, versions, stalled);
    await versionSelect(selectB, b, versions, stalled);
  } catch (error) {
    showError(document.getElementById("diff"), error);
    return;
  }
  if (!shown) view = settings(a, b);
  document.getElementById("form").addEventListener("submit", (event) => {
    event.preventDefault();
    view = {...view, a: selectA.value, b: selectB.value, at: {}};
    show(selectA.value, selectB.value);
    score();
  });
  const score = () => scoreOf(selectA.value, selectB.value);
  document.getElementById("eval-form").addEventListener("submit", (event) => { event.preventDefault(); score(); });
  document.getElementById("eval-set").addEventListener("change", score);
  if (a && b) {
    evalSets(document.getElementById("eval-set"));
    if (!shown) { show(a, b); score(); }
  }
  else put(document.getElementById("diff"), el("p", {className: "muted"}, "Choose two versions to compare."));
}

start();

// The registry's home: every tokenizer's versions as a lineage tree (newest activity
// first), a timeline of versions and corpus generations, and the progress of trainings
// (read by the server from their checkpointed merge rows). It polls while something
// trains (rarely otherwise), and changes only the rows whose data changed.
"use strict";

const POLL_MS = Number(param("poll")) || 2000;      // while something trains
const IDLE_MS = Number(param("idle")) || 15000;     // while nothing does
const rows = new Map();  // ref -> {li, key}: what each row shows
let shape = null;        // the tree's refs and parents, as drawn
let lastGood = null;     // when the server last answered
let timelineKey = null;

function corpusRef(v) {
  return v.corpus === null ? null : corpusLink(v.corpus, v.corpus_generation);
}

function sizeText(v) {
  if (v.status === "complete") return fmt(v.vocab_size) + " tokens";
  if (v.target_vocab_size !== null) return fmt(v.vocab_size) + " / " + fmt(v.target_vocab_size) + " tokens";
  return fmt(v.n_merges) + " / " + fmt(v.target_merges) + " merges";
}

function rowLine(v, p) {
  const status = statusOf(v, p);
  // Fixed columns (ref, status, size, corpus or source, date), then the details: every row's
  // cells line up with the rows above and below it.
  return el("div", {className: "row"},
    el("a", {className: "ref", href: "/version?" + new URLSearchParams({ref: v.ref})}, v.ref),
    el("span", {className: "badge " + status}, status),
    el("span", {className: "size"}, sizeText(v)),
    el("span", {className: "origin"}, v.corpus !== null ? ["corpus ", corpusRef(v)]
      : el("span", {className: "muted"}, v.source !== "trained" ? "imported (" + v.source + ")" : "-")),
    el("span", {className: "muted date"}, when(v.created_at)),
    el("span", {className: "details"},
      v.fingerprint ? el("span", {}, "fingerprint ", el("code", {title: v.fingerprint}, v.fingerprint.slice(0, 12))) : null,
      v.aliases.map((a) => el("a", {className: "badge alias", href: "/version?" + new URLSearchParams({ref: v.name + "@" + a})}, v.name + "@" + a)),
      v.corpus !== null && v.source !== "trained" ? el("span", {className: "muted"}, "imported (" + v.source + ")") : null));
}

// Each version's children, newest activity (creation of the version or of anything below
// it) first; `activity` and `size` (the largest vocabulary below) order the groups.
function ordered(versions) {
  const byRef = new Map(versions.map((v) => [v.ref, v]));
  const children = new Map();
  for (const v of versions) {
    const parent = v.parent && byRef.has(v.parent) ? v.parent : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(v);
  }
  const latest = new Map();
  const activity = (v) => {
    if (!latest.has(v.ref)) latest.set(v.ref, [v.updated_at, ...(children.get(v.ref) || []).map(activity)].sort().pop());
    return latest.get(v.ref);
  };
  const size = (v) => Math.max(v.vocab_size, ...(children.get(v.ref) || []).map(size));
  for (const list of children.values()) list.sort((a, b) => (activity(b) > activity(a) ? 1 : activity(b) < activity(a) ? -1 : 0));
  return {children, activity, size};
}

const SORTS = {
  newest: (a, b) => (a.activity > b.activity ? -1 : a.activity < b.activity ? 1 : 0),
  name: (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  size: (a, b) => b.size - a.size || (a.name < b.name ? -1 : 1),
};

// The versions grouped by name (a root's extensions, of any name, stay in its branch),
// the groups in the chosen order.
function buildTree({children, activity, size}) {
  // (an extension is indented by its ref alone, "↳": the columns after it stay in line)
  const branch = (parent, root, depth) => el("ul", {className: root ? "tree root" : "tree"},
    (parent === null ? root : children.get(parent) || []).map((v) => {
      const item = rows.get(v.ref).li;
      item.querySelector(":scope > ul")?.remove();
      item.dataset.depth = depth;
      item.style.setProperty("--depth", depth);
      if (children.has(v.ref)) item.append(branch(v.ref, false, depth + 1));
      return item;
    }));
  const groups = new Map();
  for (const v of children.get(null) || []) {
    if (!groups.has(v.name)) groups.set(v.name, {name: v.name, roots: [], activity: "", size: 0});
    const g = groups.get(v.name);
    g.roots.push(v);
    g.activity = activity(v) > g.activity ? activity(v) : g.activity;
    g.size = Math.max(g.size, size(v));
  }
  const sorted = [...groups.values()].sort(SORTS[sortSelect.value] || SORTS.newest);
  return sorted.map((g) => el("div", {className: "group", dataset: {name: g.name}},
    el("h3", {}, g.name), branch(null, g.roots, 0)));
}

// Hides the rows whose text does not hold the filter (a row stays while one below it matches).
function applyFilter() {
  const q = filterInput.value.trim().toLowerCase();
  const visible = (li) => {
    const own = !q || li.querySelector(":scope > .row").textContent.toLowerCase().includes(q);
    const below = [...li.querySelectorAll(":scope > ul > li.version")].map(visible).some(Boolean);
    li.hidden = !(own || below);
    return own || below;
  };
  let shown = 0;
  for (const group of document.querySelectorAll("#versions .group")) {
    const any = [...group.querySelectorAll(":scope > ul > li.version")].map(visible).some(Boolean);
    group.hidden = !any;
    shown += any ? 1 : 0;
  }
  document.getElementById("filtered").textContent = q ? fmt(shown) + " matching" : "";
  const query = new URLSearchParams(window.location.search);
  if (q) query.set("q", filterInput.value); else query.delete("q");
  if (sortSelect.value !== "newest") query.set("sort", sortSelect.value); else query.delete("sort");
  history.replaceState(null, "", query.toString() ? "?" + query : window.location.pathname);
}

// Runs `change`, then puts keyboard focus back on the same link or button if it was
// replaced (found again by its row and its href or text).
function keepingFocus(change) {
  const focused = document.activeElement;
  const li = focused && focused !== document.body ? focused.closest("#versions li.version") : null;
  change();
  if (!li || document.activeElement === focused) return;
  if (focused.isConnected) { focused.focus(); return; }  // moved with its row
  const row = rows.get(li.dataset.ref);
  const again = row && [...row.li.querySelectorAll("a, button")].find((n) => n.tagName === focused.tagName &&
    n.getAttribute("href") === focused.getAttribute("href") && n.textContent === focused.textContent);
  if (again) again.focus();
}

function draw(versions, progress) {
  const tree = ordered(versions);
  const children = tree.children;
  keepingFocus(() => {
    for (const v of versions) {
      const p = v.status !== "complete" ? progress.get(v.ref) : undefined;
      let row = rows.get(v.ref);
      if (!row) {
        row = {li: el("li", {className: "version"}), key: null, progressKey: null, progress: null};
        row.li.dataset.ref = v.ref;
        rows.set(v.ref, row);
      }
      const key = JSON.stringify([v, statusOf(v, p)]);
      if (row.key !== key) {  // only this row's line is replaced; its progress and subtree stay
        const line = rowLine(v, p);
        if (row.line) row.line.replaceWith(line); else row.li.prepend(line);
        row.line = line;
        row.li.dataset.status = statusOf(v, p);
        row.key = key;
      }
      const progressKey = p ? JSON.stringify([p, Math.round(p.seconds_since_checkpoint / 5)]) : null;
      if (row.progressKey !== progressKey) {
        const block = p ? progressBlock(p) : null;
        if (row.progress && block) row.progress.replaceWith(block);
        else if (row.progress) row.progress.remove();
        else if (block) row.line.after(block);
        row.progress = block;
        row.progressKey = progressKey;
      }
    }
    for (const ref of [...rows.keys()]) if (!versions.some((v) => v.ref === ref)) rows.delete(ref);
    const newShape = JSON.stringify([sortSelect.value, [...children.entries()].map(([k, list]) => [k, list.map((v) => v.ref)])]);
    if (newShape !== shape) {
      document.getElementById("versions").replaceChildren(...buildTree(tree));
      shape = newShape;
    }
    applyFilter();
  });
}

let stalledNow = new Set();  // the refs of stalled versions, as last polled

async function drawTimeline(versions) {
  const key = JSON.stringify(versions.map((v) => [v.ref, v.status, v.aliases, stalledNow.has(v.ref)]));
  if (key === timelineKey) return;
  const where = document.getElementById("timeline");
  try {
    const corpora = await api("corpora");
    const logs = await Promise.all(corpora.map((c) => api("corpus_log", {name: c.name})));
    const events = [];
    for (const v of versions) {
      events.push({at: v.created_at, kind: "version", node: [versionLink(v.ref),
        v.parent ? [" extends ", versionLink(v.parent)] : v.source !== "trained" ? " imported (" + v.source + ")" : " trained",
        v.corpus !== null ? [" on ", corpusRef(v)] : null,
        v.status === "complete" ? (v.source === "trained" ? " · done in " + duration((new Date(v.updated_at) - new Date(v.created_at)) / 1000) : null)
          : " · " + (stalledNow.has(v.ref) ? "stalled" : v.status)]});
    }
    logs.forEach((log) => {
      for (const g of log) {
        events.push({at: g.generated_at || g.created_at, kind: "generation", node: [corpusLink(g.name, g.generation),
          ": " + fmt(g.sources_added) + (g.sources_added === 1 ? " source" : " sources") + " added (" +
          fmt(g.n_words) + " words in all)"]});
      }
    });
    events.sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0));
    const aliases = versions.flatMap((v) => v.aliases.map((a) => [v.name + "@" + a, v.ref]));
    put(where,
      events.length ? el("ol", {className: "timeline"}, events.slice(0, 100).map((e) =>
        el("li", {className: "event " + e.kind}, when(e.at), e.node))) : el("p", {className: "muted"}, "Nothing yet."),
      aliases.length ? el("h3", {}, "Aliases") : null,
      aliases.length ? el("ul", {className: "aliases"}, aliases.map(([a, ref]) => el("li", {}, el("code", {}, a), " → ", versionLink(ref)))) : null,
      aliases.length ? el("p", {className: "muted"}, "The store keeps where each alias points now, not when it moved.") : null);
    timelineKey = key;
  } catch (error) {
    if (timelineKey === null) showError(where, error);
  }
}

function banner(error) {
  const where = document.getElementById("banner");
  if (!error) { where.replaceChildren(); where.className = ""; return; }
  where.className = "banner";
  where.replaceChildren(el("strong", {}, "Disconnected: "), error.message + ". " +
    (lastGood ? "What you see is from " + clock(lastGood) + "; " : "") + "trying again…");
}

async function refresh() {
  let training = false;
  try {
    const [versions, progressList] = await Promise.all([api("versions"), api("progress", {last: 6})]);
    const progress = new Map(progressList.map((p) => [p.ref, p]));
    const names = new Set(versions.map((v) => v.name));
    stalledNow = new Set(progressList.filter(stalledRun).map((p) => p.ref));
    const stalled = stalledNow.size, running = progressList.length - stalled;
    document.getElementById("summary").textContent = versions.length
      ? fmt(versions.length) + " versions of " + fmt(names.size) + " tokenizers" +
        (running ? ", " + running + " training" : "") + (stalled ? ", " + stalled + " stalled" : "")
      : "No versions yet: bpestore train NAME --corpus C --vocab-size N";
    lastDraw = [versions, progress];
    draw(versions, progress);
    drawTimeline(versions);
    training = running > 0;
    lastGood = new Date();
    banner(null);
  } catch (error) {
    if (lastGood === null) {
      document.getElementById("summary").textContent = "";
      if (!(error instanceof ApiError && error.status === 0)) showError(document.getElementById("versions"), error);
    }
    banner(error);
    training = true;  // retry soon
  }
  document.body.dataset.polling = training ? "fast" : "idle";
  setTimeout(refresh, training ? POLL_MS : IDLE_MS);
}

const filterInput = el("input", {type: "search", id: "filter", placeholder: "name, corpus, alias…", value: param("q") || ""});
const sortSelect = el("select", {id: "sort"}, [["newest", "newest activity"], ["name", "name"], ["size", "size"]].map(([v, label]) =>
  el("option", {value: v, selected: v === param("sort") ? "selected" : null}, label)));
let lastDraw = null;  // the last versions and progress drawn, to redraw in another order
filterInput.addEventListener("input", applyFilter);
sortSelect.addEventListener("change", () => { if (lastDraw) draw(...lastDraw); else applyFilter(); });
document.getElementById("versions").before(el("div", {className: "controls"},
  el("label", {for: "filter"}, "Filter"), filterInput, el("label", {for: "sort"}, "sort by"), sortSelect,
  el("span", {className: "muted", id: "filtered", "aria-live": "polite"})));
nav("/");
refresh();

// The versions page: every tokenizer's versions as a lineage tree; a version that is
// training shows its progress (read by the server from its checkpointed merge rows),
// polled every few seconds.
"use strict";

const POLL_MS = Number(param("poll")) || 2000;
const seen = new Map();  // ref -> {merges, at}: the live rate between two polls

function sizeText(v) {
  if (v.status === "complete") return fmt(v.vocab_size) + " tokens";
  const target = v.target_vocab_size !== null ? fmt(v.target_vocab_size) : fmt(v.target_merges) + " merges";
  return fmt(v.vocab_size) + " / " + target + " tokens";
}

function progressBlock(p) {
  const now = Date.now();
  const before = seen.get(p.ref);
  let rate = p.rate;
  if (before && p.merges > before.merges && now > before.at) rate = (p.merges - before.merges) / ((now - before.at) / 1000);
  if (!before || p.merges !== before.merges) seen.set(p.ref, {merges: p.merges, at: now});
  const bar = el("div");
  bar.style.width = p.fraction === null ? "0" : (100 * p.fraction).toFixed(1) + "%";
  const last = p.last_merges.map((m) => el("span", {className: tokenClass(m.token), title: "rank " + m.rank + ", id " + m.token},
    m.text));
  return el("div", {className: "progress", dataset: {ref: p.ref}},
    el("span", {className: "bar"}, bar),
    el("span", {className: "merges", dataset: {merges: p.merges}},
      fmt(p.merges) + (p.target_merges !== null ? " of " + fmt(p.target_merges) : "") + " merges"),
    " · ", el("span", {className: "rate"}, rate ? rate.toFixed(1) + " merges/s" : "rate -"),
    " · last checkpoint ", el("span", {className: "age"}, p.seconds_since_checkpoint.toFixed(0) + " s ago"),
    last.length ? el("div", {className: "chips last"}, el("span", {className: "muted"}, "last merges:"), last) : null);
}

function versionRow(v, progress) {
  const status = el("span", {className: "badge " + v.status}, v.status);
  const row = el("div", {className: "row"},
    el("a", {className: "ref", href: "/version?" + new URLSearchParams({ref: v.ref})}, v.ref),
    status,
    el("span", {className: "size"}, sizeText(v)),
    el("span", {}, "corpus ", el("code", {}, v.corpus === null ? "-" : (v.corpus_generation === null ? v.corpus : v.corpus + "@" + v.corpus_generation))),
    v.fingerprint ? el("span", {}, "fingerprint ", el("code", {title: v.fingerprint}, v.fingerprint.slice(0, 12))) : null,
    v.aliases.length ? el("span", {className: "aliases"}, "aliases ", v.aliases.map((a) => el("code", {}, v.name + "@" + a + " "))) : null,
    v.source !== "trained" ? el("span", {className: "muted"}, "imported (" + v.source + ")") : null,
    el("span", {className: "muted"}, new Date(v.created_at).toISOString().slice(0, 16).replace("T", " ")));
  return el("li", {className: "version", dataset: {ref: v.ref, status: v.status}}, row,
    progress ? progressBlock(progress) : null);
}

function tree(versions, progress) {
  const byRef = new Map(versions.map((v) => [v.ref, v]));
  const children = new Map();
  for (const v of versions) {
    const parent = v.parent && byRef.has(v.parent) ? v.parent : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(v);
  }
  const branch = (parent, root) => el("ul", {className: root ? "tree root" : "tree"},
    (children.get(parent) || []).map((v) => {
      const item = versionRow(v, progress.get(v.ref));
      if (children.has(v.ref)) item.append(branch(v.ref, false));
      return item;
    }));
  return branch(null, true);
}

async function refresh() {
  const where = document.getElementById("versions");
  try {
    const [versions, training] = await Promise.all([api("versions"), api("progress", {last: 6})]);
    const progress = new Map(training.map((p) => [p.ref, p]));
    const names = new Set(versions.map((v) => v.name));
    document.getElementById("summary").textContent = versions.length
      ? fmt(versions.length) + " versions of " + fmt(names.size) + " tokenizers" +
        (training.length ? ", " + training.length + " training" : "")
      : "No versions yet: bpestore train NAME --corpus C --vocab-size N";
    where.replaceChildren(tree(versions, progress));
  } catch (error) {
    showError(where, error);
  }
}

nav("/");
refresh();
setInterval(refresh, POLL_MS);

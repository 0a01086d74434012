// The diff of two versions, as a review reads it: what changed in numbers and spec, the
// merges B adds after the shared prefix (in rank order, with their pair counts), the ids
// whose bytes changed, and the tokens only on each side, a page at a time.
"use strict";

const PAGE = 100;

function specCell(value) {
  if (value === null || value === undefined) return el("span", {className: "muted"}, "none");
  return el("code", {}, typeof value === "string" ? value : JSON.stringify(value));
}

// A section listing a part of the diff a page at a time; `load(start)` gives
// {items: [...Node], total}.
function pagedSection(title, className, load) {
  const box = el("div", {className});
  const heading = el("h2", {}, title);
  const nav = pager(title);
  let start = 0;
  const go = async () => {
    try {
      const {items, shown, total} = await load(start);
      heading.textContent = title + " (" + fmt(total) + ")";
      nav.show(start, shown, PAGE, total);
      nav.box.hidden = total <= PAGE;
      put(box, items.length ? items : el("p", {className: "muted"}, "None."));
    } catch (error) {
      showError(box, error);
    }
  };
  nav.prev.addEventListener("click", () => { start = Math.max(0, start - PAGE); go(); });
  nav.next.addEventListener("click", () => { start += PAGE; go(); });
  go();
  return [heading, nav.box, box];
}

function chips(tokens) {
  return el("div", {className: "chips"}, colourTokens(tokens.map((t) => tokenSpan(t))));
}

function mergeTable(ref, merges) {
  return table(["rank#", "pair", "token", "id#", "pair count#"], merges.map((m) => {
    const pair = colourTokens([tokenSpan(m.pair[0], {id: m.left}), tokenSpan(m.pair[1], {id: m.right})]);
    return [fmt(m.rank), el("span", {}, pair[0], " + ", pair[1]), tokenSpan(m.text, {id: m.token}),
      link("/token", {ref, id: m.token}, String(m.token)), fmt(m.count)];
  }), {className: "new-merges"});
}

async function show(a, b) {
  const where = document.getElementById("diff");
  loading(where);
  try {
    const [d, va, vb] = await Promise.all([api("diff", {a, b, start: 0, limit: PAGE}), api("show", {ref: a}), api("show", {ref: b})]);
    const specRows = Object.entries(d.spec_changes).map(([name, [old, now]]) => [name.replace(/_/g, " "), specCell(old), specCell(now)]);
    const extension = d.shared_merges === d.merges[0];
    const newMerges = d.merges[1] - d.shared_merges;
    put(where,
      table(["", a, b], [
        ["tokens", fmt(d.vocab_size[0]), fmt(d.vocab_size[1])],
        ["merges", fmt(d.merges[0]), fmt(d.merges[1])],
        ["corpus", va.corpus === null ? "-" : corpusLink(va.corpus, va.corpus_generation), vb.corpus === null ? "-" : corpusLink(vb.corpus, vb.corpus_generation)],
        ["fingerprint", el("code", {}, (va.fingerprint || "-").slice(0, 12)), el("code", {}, (vb.fingerprint || "-").slice(0, 12))],
      ], {className: "summary"}),
      el("p", {className: "verdict"}, extension
        ? [versionLink(b), " keeps all ", el("strong", {className: "shared"}, fmt(d.shared_merges)), " merges of ", versionLink(a),
          " and adds " + fmt(newMerges) + "."]
        : ["The first ", el("strong", {className: "shared"}, fmt(d.shared_merges)), " merges are shared; then they part."]),
      el("p", {}, "ids with other bytes: ", el("strong", {className: "changed"}, fmt(d.counts.changed_ids)),
        d.counts.changed_ids ? " (a text encoded with one is not decoded right by the other)" : " (ids shared by both mean the same bytes)"),
      specRows.length ? [el("h2", {}, "Spec changes"), table(["field", a, b], specRows, {className: "spec-changes"})]
        : el("p", {className: "same-spec"}, "Same spec (pre-tokenizer, normalizer, alphabet, special tokens…)."),
      pagedSection("New merges in " + b, "new-merges-list", async (start) => {
        const merges = await api("merges", {ref: b, start: d.shared_merges + start, limit: PAGE});
        return {items: merges.length ? [mergeTable(b, merges)] : [], shown: merges.length, total: newMerges};
      }),
      d.merges[0] > d.shared_merges ? pagedSection("Merges of " + a + " after the shared prefix", "old-merges-list", async (start) => {
        const merges = await api("merges", {ref: a, start: d.shared_merges + start, limit: PAGE});
        return {items: merges.length ? [mergeTable(a, merges)] : [], shown: merges.length, total: d.merges[0] - d.shared_merges};
      }) : null,
      d.counts.changed_ids ? pagedSection("Changed ids", "changed-ids", async (start) => {
        const page = start === 0 ? d : await api("diff", {a, b, start, limit: PAGE});
        const rows = await Promise.all(page.changed_ids.slice(0, PAGE).map(async (id) => {
          const [ta, tb] = await Promise.all([api("token", {ref: a, token: id, id: "1"}), api("token", {ref: b, token: id, id: "1"})]);
          return [link("/token", {ref: b, id}, String(id)), tokenSpan(ta.token, {id}), tokenSpan(tb.token, {id})];
        }));
        return {items: [table(["id#", a, b], rows)], shown: rows.length, total: d.counts.changed_ids};
      }) : null,
      pagedSection("Tokens only in " + a, "only-a", async (start) => {
        const page = start === 0 ? d : await api("diff", {a, b, start, limit: PAGE});
        return {items: page.only_a.length ? [chips(page.only_a)] : [], shown: page.only_a.length, total: d.counts.only_a};
      }),
      pagedSection("Tokens only in " + b, "only-b", async (start) => {
        const page = start === 0 ? d : await api("diff", {a, b, start, limit: PAGE});
        return {items: page.only_b.length ? [chips(page.only_b)] : [], shown: page.only_b.length, total: d.counts.only_b};
      }));
  } catch (error) {
    showError(where, error);
  }
}

// Which two versions: the URL's; b alone: b against its parent; neither: the newest
// version that has a parent, against it (else the two newest).
async function defaults(versions) {
  let a = param("a"), b = param("b");
  if (b && !a) a = (await api("show", {ref: b})).parent;
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
  let a, b;
  try {
    const versions = await api("versions");
    [a, b] = await defaults(versions);
    await versionSelect(selectA, a);
    await versionSelect(selectB, b);
  } catch (error) {
    showError(document.getElementById("diff"), error);
    return;
  }
  document.getElementById("form").addEventListener("submit", (event) => {
    event.preventDefault();
    history.replaceState(null, "", "?" + new URLSearchParams({a: selectA.value, b: selectB.value}));
    show(selectA.value, selectB.value);
  });
  document.getElementById("eval-form").addEventListener("submit", (event) => {
    event.preventDefault();
    scoreCard(document.getElementById("eval"), [selectA.value, selectB.value], document.getElementById("eval-text").value,
      selectA.value);
  });
  if (a && b) show(a, b);
  else put(document.getElementById("diff"), el("p", {className: "muted"}, "Choose two versions to compare."));
}

start();

// One corpus: its generations (which versions pin each), the chosen generation's
// sources and digests, its top words, and the diff between two generations.
"use strict";

const name = param("name") || "";
const base = name.split("@")[0];

async function showDiff(a, b, where) {
  loading(where);
  history.replaceState(null, "", "?" + new URLSearchParams({name, a, b}));
  try {
    const d = await api("corpus_diff", {a: base + "@" + a, b: base + "@" + b, limit: 20});
    const words = (list, cols, cells) => list.length ? table(cols, list.map(cells)) : el("p", {className: "muted"}, "None.");
    put(where,
      el("p", {className: "diff-summary"}, fmt(d.new_words) + " new words, " + fmt(d.vanished_words) + " vanished, " +
        fmt(d.changed_words) + " with other counts."),
      el("h3", {}, "New words (most frequent first)"), words(d.new, ["word", "count#"], (w) => [tokenSpan(w.word), fmt(w.count)]),
      el("h3", {}, "Vanished words"), words(d.vanished, ["word", "count#"], (w) => [tokenSpan(w.word), fmt(w.count)]),
      el("h3", {}, "Largest count changes"), words(d.changed, ["word", "from#", "to#", "change#"],
        (w) => [tokenSpan(w.word), fmt(w.from), fmt(w.to), (w.delta > 0 ? "+" : "") + fmt(w.delta)]));
  } catch (error) {
    showError(where, error);
  }
}

function diffForm(log) {
  const kept = log.filter((g) => g.kept);
  const options = (chosen) => log.map((g) => el("option", {value: g.generation, selected: g.generation === chosen ? "selected" : null,
    disabled: g.kept ? null : "disabled"}, base + "@" + g.generation + (g.kept ? "" : " (counts not kept)")));
  const a = el("select", {id: "gen-a"}, options(Number(param("a")) || (kept.length > 1 ? kept[kept.length - 2].generation : null)));
  const b = el("select", {id: "gen-b"}, options(Number(param("b")) || (kept.length ? kept[kept.length - 1].generation : null)));
  const result = el("div", {className: "corpus-diff", "aria-live": "polite"});
  const form = el("form", {className: "controls"}, el("label", {for: "gen-a"}, "From"), a, el("label", {for: "gen-b"}, "to"), b,
    el("button", {type: "submit"}, "Compare"));
  form.addEventListener("submit", (event) => { event.preventDefault(); showDiff(a.value, b.value, result); });
  if (param("a") && param("b")) showDiff(param("a"), param("b"), result);
  else if (kept.length < 2) result.append(el("p", {className: "muted"},
    "Only generations whose word counts are kept can be compared (the newest, and those a version was trained on)."));
  return [form, result];
}

async function start() {
  nav("/corpora");
  const where = document.getElementById("content");
  if (!name) { showError(where, new Error("Give a corpus: /corpus?name=C or C@N")); return; }
  try {
    const [info, log] = await Promise.all([api("corpus", {name, top: 30}), api("corpus_log", {name: base})]);
    document.getElementById("title").textContent = "Corpus " + info.ref;
    document.title = info.ref + " · bpestore";
    where.removeAttribute("role");
    put(where,
      el("div", {className: "columns"}, facts([["generation", info.ref + (info.generation === log[log.length - 1].generation ? " (the newest)" : "")],
        ["sources", fmt(info.n_sources)], ["bytes", fmt(info.size_bytes)], ["words", fmt(info.n_words)],
        ["distinct words", fmt(info.n_distinct)], ["digest", el("code", {}, info.digest)],
        ["word counts kept", info.kept ? "yes" : "no (only the newest generation and those a version was trained on)"],
        ["versions trained on it", info.pinned_by.length ? info.pinned_by.flatMap((r, i) => (i ? [" ", versionLink(r)] : [versionLink(r)])) : "-"],
        ["created", when(info.generated_at || info.created_at)]]), specFacts(info.spec)),
      el("h2", {}, "Generations"),
      table(["generation", "when", "sources added#", "sources#", "words#", "distinct#", "digest", "kept", "versions trained on it"],
        [...log].reverse().map((g) => Object.assign([corpusLink(g.name, g.generation), when(g.generated_at), fmt(g.sources_added), fmt(g.n_sources),
          fmt(g.n_words), fmt(g.n_distinct), el("code", {title: g.digest}, g.digest.slice(0, 12)), g.kept ? "yes" : "no",
          g.pinned_by.length ? g.pinned_by.flatMap((r, i) => (i ? [" ", versionLink(r)] : [versionLink(r)])) : "-"],
        {dataset: {generation: g.generation}})), {className: "generations stack"}),
      el("h2", {}, "Sources of " + info.ref),
      table(["source", "generation#", "bytes#", "words#", "distinct#", "sha256", "added"],
        info.sources.map((s) => [el("code", {}, s.source), fmt(s.generation), fmt(s.size_bytes), fmt(s.n_words), fmt(s.n_distinct),
          el("code", {title: s.sha256}, s.sha256.slice(0, 12)) , when(s.created_at)]), {className: "sources stack"}),
      el("h2", {}, "Top words of " + info.ref),
      info.top_words.length
        ? el("div", {className: "chips top-words"}, info.top_words.map((w) => el("span", {className: "word"}, tokenSpan(w.word), " " + fmt(w.count))))
        : el("p", {className: "muted"}, "Its word counts are not kept."),
      el("h2", {}, "Diff between two generations"), diffForm(log));
  } catch (error) {
    document.getElementById("title").textContent = "Corpus " + name;
    showError(where, error);
  }
}

start();

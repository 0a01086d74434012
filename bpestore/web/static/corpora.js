// Every corpus: its newest generation, its size, and the versions trained on it.
"use strict";

async function start() {
  nav("/corpora");
  const where = document.getElementById("content");
  try {
    const corpora = await api("corpora");
    where.removeAttribute("role");
    if (!corpora.length) {
      put(where, el("p", {className: "muted"}, "No corpora yet: bpestore ingest NAME FILE..."));
      return;
    }
    put(where, table(["corpus", "generation#", "sources#", "bytes#", "words#", "distinct words#", "pre-tokenizer", "versions trained on it", "updated"],
      corpora.map((c) => Object.assign([corpusLink(c.name), fmt(c.generation), fmt(c.n_sources), fmt(c.size_bytes), fmt(c.n_words),
        fmt(c.n_distinct), el("code", {}, c.spec.pattern ? "regex" : c.spec.pretokenizer),
        c.pinned_by.length ? c.pinned_by.flatMap((r, i) => (i ? [" ", versionLink(r)] : [versionLink(r)])) : "-",
        when(c.generated_at || c.created_at)], {dataset: {name: c.name}})), {className: "corpora stack"}));
  } catch (error) {
    showError(where, error);
  }
}

start();

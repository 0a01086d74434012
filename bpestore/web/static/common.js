// Shared by every page. Token text is data: it is only ever put into the page as
// text (textContent / text nodes), never parsed as markup.
"use strict";

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "className") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// where.replaceChildren(...) without the null/false children (which it would print as "null").
function put(where, ...children) {
  where.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return where;
}

class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

async function api(name, params, body) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value === null || value === undefined || value === "") continue;
    for (const v of Array.isArray(value) ? value : [value]) query.append(key, String(v));
  }
  const url = "/api/" + name + (query.toString() ? "?" + query : "");
  const options = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
  let response;
  try {
    response = await fetch(url, options);
  } catch (error) {
    throw new ApiError("the server does not answer (is bpestore serve still running?)", 0);
  }
  const data = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new ApiError(data.error || response.statusText, response.status);
  return data;
}

function param(name) {
  return new URLSearchParams(window.location.search).get(name);
}

function fmt(n) {
  return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US");
}

function link(path, params, text) {
  return el("a", {href: path + "?" + new URLSearchParams(params)}, text);
}

function versionLink(ref) {
  return link("/version", {ref}, ref);
}

function corpusLink(name, generation) {
  const ref = generation === null || generation === undefined ? name : name + "@" + generation;
  return link("/corpus", {name: ref}, ref);
}

// "2026-11-26 13:05" in the reader's time zone; the full ISO time on hover.
function when(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return el("time", {datetime: d.toISOString(), title: d.toISOString()},
    d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes()));
}

function duration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "-";
  const s = Math.max(0, Math.round(seconds));
  if (s < 90) return s + " s";
  if (s < 90 * 60) return Math.round(s / 60) + " min";
  if (s < 36 * 3600) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " days";
}

function nav(current) {
  for (const [key, , initial] of DISPLAY) document.body.classList.toggle("show-" + key, displayPreference(key, initial));
  const pages = [["/", "Registry"], ["/corpora", "Corpora"], ["/playground", "Playground"], ["/diff", "Diff"]];
  const bar = el("nav", {"aria-label": "bpestore"}, el("span", {className: "brand", text: "bpestore"}),
    pages.map(([href, label]) => el("a", {href, "aria-current": href === current ? "page" : null}, label)));
  document.body.prepend(bar);
}

function showError(where, error) {
  where.replaceChildren(el("p", {className: "error", role: "alert"}, String(error.message || error)));
}

function loading(where) {
  where.replaceChildren(el("p", {className: "muted", role: "status"}, "Loading…"));
}

// A table: `head` the column names (a name ending in "#" is a number column), `rows`
// arrays of cells (a Node or text); the first cell of each row is its header.
function table(head, rows, props) {
  const numeric = head.map((h) => h.endsWith("#"));
  const names = head.map((h) => h.replace(/#$/, ""));
  return el("div", {className: "scroll"}, el("table", props || {},
    el("thead", {}, el("tr", {}, names.map((h, i) => el("th", {scope: "col", className: numeric[i] ? "num" : null}, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", cells.dataset ? {dataset: cells.dataset} : {},
      cells.map((c, i) => i === 0
        ? el("th", {scope: "row", className: numeric[i] ? "num" : null, dataset: {label: names[i]}}, c)
        : el("td", {className: numeric[i] ? "num" : (c instanceof Node && c.classList && c.classList.contains("tok") ? "text" : null),
          dataset: {label: names[i]}}, c)))))));
}

// A key/value table whose keys are row headers.
function facts(rows) {
  return el("div", {className: "scroll"}, el("table", {className: "info"}, el("tbody", {},
    rows.map(([k, v]) => el("tr", {}, el("th", {scope: "row"}, k), el("td", {}, v === null || v === undefined ? "-" : v))))));
}

// A spec (pre-tokenizer, normalizer, alphabet...): every field, "-" for none.
function specFacts(spec) {
  const value = (v) => {
    if (v === null || v === undefined || (Array.isArray(v) && !v.length) || (typeof v === "object" && !Object.keys(v).length)) return "-";
    if (Array.isArray(v)) return v.map((x) => el("code", {}, x)).flatMap((c) => [c, " "]).slice(0, -1);
    return el("code", {}, typeof v === "object" ? JSON.stringify(v) : String(v));
  };
  const box = facts(Object.entries(spec).map(([k, v]) => [k.replace(/_/g, " "), value(v)]));
  box.querySelector("table").classList.add("spec");
  return box;
}

// Earlier / later buttons and a page number over pages of `size` items; `onPage(start)`,
// when set, is called with the first item of the page the reader typed.
function pager(label) {
  const prev = el("button", {type: "button", className: "prev"}, "← earlier");
  const next = el("button", {type: "button", className: "next"}, "later →");
  const number = el("input", {type: "number", min: "1", value: "1", className: "page-number", "aria-label": label + ": page"});
  const of = el("span", {className: "muted of"});
  const jump = el("label", {className: "jump"}, "page ", number, of);
  const where = el("span", {className: "muted where", "aria-live": "polite"});
  const box = el("div", {className: "pager", role: "group", "aria-label": label}, prev, next, jump, where);
  const state = {size: 100, total: undefined};
  const self = {box, prev, next, where, number, onPage: null, show(start, shown, size, total) {
    state.size = size;
    state.total = total;
    prev.disabled = start === 0;
    next.disabled = total !== undefined ? start + shown >= total : shown < size;
    where.textContent = shown ? fmt(start + 1) + "–" + fmt(start + shown) + (total !== undefined ? " of " + fmt(total) : "") : "none";
    number.value = String(Math.floor(start / size) + 1);
    const pages = total === undefined ? null : Math.max(1, Math.ceil(total / size));
    if (pages !== null) number.max = String(pages);
    of.textContent = pages === null ? "" : " of " + fmt(pages);
    jump.hidden = pages === null || pages <= 1;
  }};
  number.addEventListener("change", () => {
    const pages = state.total === undefined ? Infinity : Math.max(1, Math.ceil(state.total / state.size));
    const page = Math.min(Math.max(1, Math.floor(Number(number.value)) || 1), pages);
    if (self.onPage) self.onPage((page - 1) * state.size);
  });
  return self;
}

// -- tokens as readable text ----------------------------------------------------------
// Token text from the API is token_text's: valid UTF-8 as characters, any other byte as
// \xNN (always \x80-\xff: bytes below 0x80 are valid UTF-8). A token span's textContent is
// its characters only; whitespace and control marks and the hex of split characters are
// drawn by CSS (::before/::after), so copying the text copies the real text.

// Paul Tol's "light" colours, chosen so each pair stays apart (CIELAB distance >= 17)
// under simulated deuteranopia, protanopia and tritanopia (Machado 2009).
const PALETTE_SIZE = 6;
const BYTE_ESCAPE = /\\x([89a-f][0-9a-f])/g;

const UTF8 = new TextEncoder();
const HEX = Array.from({length: 256}, (_, b) => b.toString(16).padStart(2, "0"));

function tokenBytesHex(text) {
  // The hex of a token's bytes, from its token_text form.
  const out = [];
  let last = 0;
  for (const match of text.matchAll(BYTE_ESCAPE)) {
    for (const b of UTF8.encode(text.slice(last, match.index))) out.push(HEX[b]);
    out.push(match[1]);
    last = match.index + match[0].length;
  }
  for (const b of UTF8.encode(text.slice(last))) out.push(HEX[b]);
  return out;
}

// How many bytes a token is, from its token_text form.
function tokenByteLength(text) {
  if (!text.includes("\\x")) return UTF8.encode(text).length;
  return tokenBytesHex(text).length;
}

const WS_MARKS = {" ": "·", "\t": "→", "\n": "↵", "\r": "←", "\u00a0": "°"};
const CONTROL_NAMES = ["NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR", "SO", "SI",
  "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US"];

// A run of spaces is one span (its dots a repeated background): cl100k's 128-space token
// is one element, not 128.
const INVISIBLE = {0x200b: "ZWSP", 0x200c: "ZWNJ", 0x200d: "ZWJ", 0x2060: "WJ", 0xfeff: "BOM", 0x00ad: "SHY"};

function appendChars(node, chars, running) {
  let run = "", spaces = null;
  for (const ch of chars) {
    const code = ch.codePointAt(0);
    const mark = code < 0x21 || code === 0x7f || code === 0xa0 ? WS_MARKS[ch] || (code === 0x7f ? "DEL" : CONTROL_NAMES[code])
      : INVISIBLE[code] || null;  // a character that draws nothing is named, never an empty token
    if (mark === null || mark === undefined) { run += ch; spaces = null; continue; }
    if (run) { node.append(run); run = ""; }
    if (ch === " " && spaces) { spaces.textContent += ch; continue; }
    const span = document.createElement("span");
    spaces = ch === " " ? span : null;
    if (ch === "\n" && !running) {  // a token on its own: its newline a mark, not a line break
      span.className = "ws nl alone";
    } else {
      span.className = WS_MARKS[ch] ? (ch === "\n" ? "ws nl" : ch === " " ? "ws sp" : "ws") : "ctl";
      span.textContent = ch;
    }
    span.dataset.mark = mark;
    node.append(span);
  }
  if (run) node.append(run);
}

const BLANK = /^[ \t\u00a0]+$/;

// A token as a span: `text` in token_text form; opts.id (shown on demand and in its label);
// opts.running: a token in running text (its newlines break the line; else they are marks).
function tokenSpan(text, opts) {
  const o = opts || {};
  const span = document.createElement("span");
  span.className = "tok";
  span.dataset.token = text;
  const hasId = o.id !== undefined && o.id !== null;
  if (hasId) span.dataset.id = o.id;
  let split = false;
  if (text.includes("\\x")) {
    let last = 0;
    for (const match of text.matchAll(BYTE_ESCAPE)) {
      appendChars(span, text.slice(last, match.index), o.running);
      const byte = document.createElement("span");
      byte.className = "byte";
      byte.dataset.hex = match[1];
      span.append(byte);
      last = match.index + match[0].length;
      split = true;
    }
    appendChars(span, text.slice(last), o.running);
  } else {
    appendChars(span, text, o.running);
  }
  if (split) span.classList.add("split");
  // may wrap inside itself: a long token, or one of whitespace alone (a run of them must wrap)
  if (o.running && (text.length > 24 || BLANK.test(text))) span.classList.add("long");
  if (!o.running) labelToken(span);
  return span;
}

// A token's label (screen readers) and tooltip: its id, its text, its bytes when it holds
// part of a character. Running text (thousands of tokens) labels a token when it is
// focused or hovered: labelling all of them up front doubled the time to draw them.
function labelToken(span) {
  if (span.hasAttribute("aria-label")) return span;
  const text = span.dataset.token;
  const split = span.classList.contains("split");
  const label = (span.dataset.id !== undefined ? "id " + span.dataset.id + ": " : "") + describeToken(text) +
    (split ? " (bytes " + tokenBytesHex(text).join(" ") + ", part of a character)" : "") +
    (span.dataset.chars ? ": with its neighbours, ‘" + span.dataset.chars + "’" : "");
  span.title = label;
  span.setAttribute("aria-label", label);
  span.setAttribute("role", "listitem");
  return span;
}

function describeToken(text) {
  // The token as a screen reader and a tooltip say it: quoted, whitespace named.
  const names = {" ": "space", "\t": "tab", "\n": "newline", "\r": "return"};
  if (/^[ \t\n\r]+$/.test(text)) {
    const parts = [];
    for (const ch of text) {
      if (parts.length && parts[parts.length - 1][0] === ch) parts[parts.length - 1][1]++;
      else parts.push([ch, 1]);
    }
    return parts.map(([ch, n]) => (n > 1 ? n + " × " : "") + names[ch]).join(", ");
  }
  return "‘" + text.replace(BYTE_ESCAPE, "") + "’";
}

// Colours for a row of tokens: the id picks a colour, bumped when the token before has it,
// so two neighbours never share one.
function colourTokens(spans) {
  let previous = -1;
  for (const span of spans) {
    let c = Number(span.dataset.id || 0) % PALETTE_SIZE;
    if (c === previous) c = (c + 1) % PALETTE_SIZE;
    span.className = span.className.replace(/ c\d\b/, "") + " c" + c;
    previous = c;
  }
  return spans;
}

// In running text, the tokens that each hold part of a character: each is told which
// character the run of them spells (its label and tooltip), e.g. ‘ï’ from c3 + af.
const UTF8_FATAL = new TextDecoder("utf-8", {fatal: true});

function nameSplitCharacters(spans) {
  let run = [], bytes = [];
  const finish = () => {
    if (run.length) {
      let chars = "";
      try { chars = UTF8_FATAL.decode(new Uint8Array(bytes)); } catch (error) { chars = ""; }
      if (chars) for (const span of run) span.dataset.chars = chars;
    }
    run = [];
    bytes = [];
  };
  for (const span of spans) {
    if (!span.classList.contains("split")) { finish(); continue; }
    run.push(span);
    for (const hex of tokenBytesHex(span.dataset.token)) bytes.push(parseInt(hex, 16));
    try { UTF8_FATAL.decode(new Uint8Array(bytes)); finish(); } catch (error) { /* the character goes on */ }
  }
  finish();
}

// A row of token spans, one tab stop: arrow keys move between tokens, and each focused
// token's id and bytes are announced in `info` (an aria-live element). The tokens are
// grouped into lines (a group ends after a token ending in a newline), each laid out and
// painted only when on screen: 10 kB of text is thousands of spans.
function tokenRow(container, spans, info) {
  colourTokens(spans);
  nameSplitCharacters(spans);
  if (spans.length) labelToken(spans[0]).setAttribute("tabindex", "0");  // roving: one token is the tab stop
  container.replaceChildren(...tokenLines(spans));
  container.setAttribute("role", "list");
  if (!container.dataset.keyed) {
    container.dataset.keyed = "1";
    container.addEventListener("keydown", (event) => {
      const at = event.target.closest(".tok");
      if (!at || at.closest(".tokens") !== container) return;
      const step = {ArrowRight: "next", ArrowDown: "next", ArrowLeft: "previous", ArrowUp: "previous", Home: "first", End: "last"}[event.key];
      if (!step) return;
      const all = container.querySelectorAll(".tok");
      const to = step === "first" ? all[0] : step === "last" ? all[all.length - 1] : neighbourToken(at, step === "next");
      if (!to || to === at) return;
      event.preventDefault();
      at.removeAttribute("tabindex");
      labelToken(to).setAttribute("tabindex", "0");
      to.focus();
    });
    container.addEventListener("focusin", (event) => {
      const span = event.target.closest(".tok");
      if (span && info) info.textContent = tokenDetail(span);
    });
    container.addEventListener("mouseover", (event) => {
      const span = event.target.closest(".tok");
      if (span) labelToken(span);
      if (span && info) info.textContent = tokenDetail(span);
    });
  }
  return container;
}

// Token spans grouped in `div.line`s, each ending after a token that ends in a newline.
function tokenLines(spans) {
  const lines = [];
  let line = null;
  for (const span of spans) {
    if (!line) { line = document.createElement("div"); line.className = "line"; lines.push(line); }
    line.append(span);
    if (span.dataset.token.endsWith("\n")) line = null;
  }
  return lines;
}

function neighbourToken(at, forward) {
  const sibling = forward ? at.nextElementSibling : at.previousElementSibling;
  if (sibling) return sibling;
  const line = forward ? at.parentNode.nextElementSibling : at.parentNode.previousElementSibling;
  return line && (forward ? line.firstElementChild : line.lastElementChild);
}

function tokenDetail(span) {
  const text = span.dataset.token;
  const hex = tokenBytesHex(text);
  return (span.dataset.id !== undefined ? "id " + span.dataset.id + " · " : "") + describeToken(text) + " · " +
    hex.length + (hex.length === 1 ? " byte: " : " bytes: ") + hex.join(" ") +
    (span.classList.contains("split") ? " · part of a character" + (span.dataset.chars ? ": ‘" + span.dataset.chars + "’" : "") : "");
}

// The display toggles (whitespace marks, ids) as checkboxes that set classes on <body>,
// remembered in localStorage.
const DISPLAY = [["marks", "whitespace marks", true], ["ids", "ids", false]];

function displayPreference(key, initial) {
  const stored = localStorage.getItem("bpestore." + key);
  return stored === null ? initial : stored === "1";
}

function displayToggles() {
  const box = el("span", {className: "toggles"});
  for (const [key, label, initial] of DISPLAY) {
    const on = displayPreference(key, initial);
    document.body.classList.toggle("show-" + key, on);
    const input = el("input", {type: "checkbox", id: "toggle-" + key, checked: on ? "checked" : null});
    input.addEventListener("change", () => {
      document.body.classList.toggle("show-" + key, input.checked);
      localStorage.setItem("bpestore." + key, input.checked ? "1" : "0");
    });
    box.append(el("label", {}, input, " " + label));
  }
  return box;
}

// The score card of versions on a text (`stats`): bytes per token, tokens per word,
// the share of the vocabulary used and of unknown tokens; `base` marks the row others
// are compared with.
// Without a text, on the held-out text (HELD_OUT says what it is).
const HELD_OUT = "the held-out text: a passage of Charles Dickens’s Hard Times (2,374 bytes), in no sample bpestore ships";

async function scoreCard(where, refs, text, base, corpus) {
  loading(where);
  try {
    const stats = corpus ? await api("stats", {ref: refs, corpus})
      : text ? await api("stats", undefined, {ref: refs, text}) : await api("stats", {ref: refs});
    const first = stats.find((s) => s.ref === base) || stats[0];
    const change = (s) => s === first || !first.tokens ? "" :
      (s.tokens >= first.tokens ? "+" : "") + fmt(s.tokens - first.tokens) + " (" + ((s.tokens / first.tokens - 1) * 100).toFixed(1) + " %)";
    const share = (x) => (x === null || x === undefined ? "-" : (100 * x).toFixed(2) + " %");
    put(where, table(["version", "tokens#", "change#", "bytes/token#", "tokens/word#", "vocabulary used#", "unknown#"],
      stats.map((s) => Object.assign([versionLink(s.ref), fmt(s.tokens), change(s), s.bytes_per_token.toFixed(3),
        s.tokens_per_word === null ? "-" : s.tokens_per_word.toFixed(3), share(s.vocab_use), share(s.unknown_share)],
      {dataset: {ref: s.ref}})), {className: "score-card stack"}),
    el("p", {className: "muted"}, "On " + (corpus ? "the corpus " + first.file + " (exact, from its word counts)" : text ? "your text" : HELD_OUT) + ": " + fmt(first.bytes) + " bytes, " + fmt(first.words) +
      " words; change: tokens against " + first.ref + "."));
  } catch (error) {
    showError(where, error);
  }
}

// What a version's status is as a reader needs it: "stalled" for an unfinished version
// with no checkpoint for STALLED_S seconds (`progress` gives the age), else its status.
const STALLED_S = Number(param("stalled")) || 60;  // the trainer checkpoints at least every 10 s

function statusOf(v, p) {
  if (v.status !== "complete" && p && stalledRun(p)) return "stalled";
  return v.status;
}

// Whether an unfinished version's trainer has stopped: no process holds its training lock
// (`running` false, known at once), or, where the server cannot tell (null), no checkpoint
// for STALLED_S seconds.
function stalledRun(p) {
  if (p.status === "complete") return false;
  if (p.running === true) return false;
  // (a run takes its lock a moment after its version is written: not stalled yet then)
  return p.seconds_since_checkpoint > (p.running === false ? 3 : STALLED_S);
}

function resumeCommand(ref) {
  return "bpestore train --resume " + ref;
}

// A version select filled with the store's versions (`versions`, else fetched); an
// unfinished one says so ("training", or "stalled" where `stalled` holds its ref).
async function versionSelect(select, chosen, versions, stalled) {
  const list = versions || await api("versions");
  if (!stalled) {  // asked once a list (one request, only while some version is unfinished)
    if (!stalledAsked.has(list)) stalledAsked.set(list, stalledRefs(list));
    stalled = await stalledAsked.get(list);
  }
  select.replaceChildren();
  for (const v of list) {
    const status = stalled && stalled.has(v.ref) ? "stalled" : v.status;
    const label = v.ref + (v.aliases.length ? " (" + v.aliases.join(", ") + ")" : "") +
      (status === "complete" ? "" : " [" + status + "]");
    select.append(el("option", {value: v.ref, selected: v.ref === chosen ? "selected" : null}, label));
  }
  if (chosen && ![...select.options].some((o) => o.value === chosen)) {
    select.append(el("option", {value: chosen, selected: "selected"}, chosen));
  }
  return list;
}

function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

const stalledAsked = new WeakMap();  // a versions list -> the promise of its stalled refs

// The refs of the unfinished versions whose trainer stopped (one request, only when some
// version is unfinished).
async function stalledRefs(versions) {
  if (versions.every((v) => v.status === "complete")) return new Set();
  const progress = await api("progress", {last: 0}).catch(() => []);
  const byRef = new Map(versions.map((v) => [v.ref, v]));
  return new Set(progress.filter((p) => byRef.has(p.ref) && statusOf(byRef.get(p.ref), p) === "stalled").map((p) => p.ref));
}

// -- a training run's progress (the registry and the version page) ---------------------
const seen = new Map();  // ref -> {merges, at}: the live rate between two polls

function liveRate(p) {
  const now = Date.now();
  const before = seen.get(p.ref);
  let rate = p.rate;
  if (before && p.merges > before.merges && now > before.at) rate = (p.merges - before.merges) / ((now - before.at) / 1000);
  if (!before || p.merges !== before.merges) seen.set(p.ref, {merges: p.merges, at: now, rate});
  else if (before.rate) rate = before.rate;
  return rate;
}

function progressBlock(p) {
  const stalled = stalledRun(p);
  const rate = stalled ? null : liveRate(p);
  const left = rate && p.target_merges !== null ? (p.target_merges - p.merges) / rate : null;
  const bar = el("div", {className: stalled ? "stalled" : null});
  bar.style.width = p.fraction === null ? "0" : (100 * p.fraction).toFixed(1) + "%";
  const last = p.last_merges.map((m) => tokenSpan(m.text, {id: m.token}));
  colourTokens(last);
  return el("div", {className: "progress" + (stalled ? " stalled" : ""), dataset: {ref: p.ref}},
    el("span", {className: "bar", role: "progressbar", "aria-label": "merges of " + p.ref, "aria-valuemin": "0",
      "aria-valuemax": p.target_merges === null ? null : p.target_merges, "aria-valuenow": p.merges}, bar),
    el("span", {className: "merges", dataset: {merges: p.merges}},
      fmt(p.merges) + (p.target_merges !== null ? " of " + fmt(p.target_merges) : "") + " merges"),
    stalled
      ? [" · ", el("strong", {className: "stalled-note"}, (p.running === false
          ? "stalled: no trainer is running (last checkpoint " + duration(p.seconds_since_checkpoint) + " ago)"
          : "stalled: no checkpoint for " + duration(p.seconds_since_checkpoint) + ", the trainer has probably stopped") +
          "; resume it with "), el("code", {className: "resume"}, resumeCommand(p.ref))]
      : [" · ", el("span", {className: "rate"}, rate ? rate.toFixed(1) + " merges/s" : "rate -"),
         " · ", el("span", {className: "left"}, left === null ? "time left -" : "about " + duration(left) + " left"),
         " · last checkpoint ", el("span", {className: "age"}, duration(p.seconds_since_checkpoint) + " ago")],
    last.length ? el("div", {className: "chips last"}, el("span", {className: "muted"}, "last merges:"), last) : null);
}


// "13:05:09": a time of day, 24-hour, in the reader's time zone.
function clock(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds());
}

// Marks the page's data drawn and painted (the "bpestore:drawn" performance mark, which
// the benchmark reads).
function drawn() {
  requestAnimationFrame(() => setTimeout(() => performance.mark("bpestore:drawn"), 0));
}

// The evaluation sets a score card can use: the held-out text (or the reader's), or a
// stored corpus (its word counts).
async function evalSets(select) {
  const corpora = await api("corpora").catch(() => []);
  put(select, el("option", {value: ""}, "the held-out text (or yours)"),
    corpora.map((c) => el("option", {value: c.name}, "corpus " + c.name)));
}

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
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
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
  const response = await fetch(url, options);
  const data = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new Error(data.error || response.statusText);
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

function nav(current) {
  const pages = [["/", "Versions"], ["/playground", "Playground"], ["/diff", "Diff"]];
  const bar = el("nav", {}, el("span", {className: "brand", text: "bpestore"}),
    pages.map(([href, label]) => el("a", {href, className: href === current ? "current" : null}, label)));
  document.body.prepend(bar);
}

function showError(where, error) {
  where.replaceChildren(el("p", {className: "error", role: "alert"}, String(error.message || error)));
}

function tokenClass(id) {
  return "tok tok-c" + (Number(id) % 8);
}

// A version select filled with the versions of the store (complete ones first).
async function versionSelect(select, chosen) {
  const versions = await api("versions");
  select.replaceChildren();
  for (const v of versions) {
    const label = v.ref + (v.aliases.length ? " (" + v.aliases.join(", ") + ")" : "") +
      (v.status === "complete" ? "" : " [" + v.status + "]");
    select.append(el("option", {value: v.ref, selected: v.ref === chosen ? "selected" : null}, label));
  }
  if (chosen && ![...select.options].some((o) => o.value === chosen)) {
    select.append(el("option", {value: chosen, selected: "selected"}, chosen));
  }
  return versions;
}

function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

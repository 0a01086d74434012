// A line chart in SVG with real ticks, hover values on every point, and the points
// again as a table for screen readers and for copying.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// About `count` round tick values covering [lo, hi].
function ticks(lo, hi, count) {
  if (hi <= lo) return [lo];
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

// series: [{name, points: [[x, y], ...]}]; xLabel, yLabel: axis names; yDigits: decimals shown.
// Drawn at the width it will have (up to 680 px), so its labels keep their size on a phone;
// the legend is below it, never over the curves.
function lineChart(series, xLabel, yLabel, yDigits) {
  const room = (document.querySelector("main") || document.body).clientWidth;
  const W = Math.round(Math.min(680, Math.max(280, room - 4))), H = W < 500 ? 260 : 320, L = 60, B = 44, T = 14, R = 20;
  const all = series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const y0 = Math.min(...ys), y1 = Math.max(...ys);
  const sx = (x) => L + (x1 === x0 ? 0 : (x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - (y1 === y0 ? 0 : (y - y0) / (y1 - y0)) * (H - B - T);
  const summary = series.map((s) => s.name + ": " + yLabel + " from " + s.points[0][1].toFixed(yDigits) + " at " +
    fmt(s.points[0][0]) + " to " + s.points[s.points.length - 1][1].toFixed(yDigits) + " at " + fmt(s.points[s.points.length - 1][0])).join("; ");
  const chart = svg("svg", {class: "curve", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": yLabel + " against " + xLabel + ". " + summary});
  for (const x of ticks(x0, x1, 6)) {
    chart.append(svg("line", {class: "grid", x1: sx(x), y1: T, x2: sx(x), y2: H - B}),
      svg("text", {x: sx(x), y: H - B + 16, "text-anchor": "middle"}, fmt(x)));
  }
  for (const y of ticks(y0, y1, 5)) {
    chart.append(svg("line", {class: "grid", x1: L, y1: sy(y), x2: W - R, y2: sy(y)}),
      svg("text", {x: L - 6, y: sy(y) + 4, "text-anchor": "end"}, y.toFixed(Math.max(0, yDigits - 1))));
  }
  chart.append(svg("line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B}),
    svg("line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B}),
    svg("text", {x: (L + W) / 2, y: H - 8, "text-anchor": "middle"}, xLabel),
    svg("text", {x: 14, y: (T + H - B) / 2, transform: "rotate(-90 14 " + (T + H - B) / 2 + ")", "text-anchor": "middle"}, yLabel));
  series.forEach((s, i) => {
    chart.append(svg("polyline", {class: "line s" + (i % 4), "data-name": s.name,
      points: s.points.map((p) => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" ")}));
    const dots = svg("g", {class: "s" + (i % 4)});
    for (const p of s.points) {
      const dot = svg("circle", {cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: 3, fill: "transparent", stroke: "none"});
      dot.append(svg("title", {}, s.name + ": " + fmt(p[0]) + " " + xLabel + " → " + p[1].toFixed(yDigits) + " " + yLabel));
      dots.append(dot);
    }
    chart.append(dots);
  });
  const legend = series.length > 1 ? el("ul", {className: "legend"}, series.map((s, i) =>
    el("li", {}, el("span", {className: "swatch s" + (i % 4), "aria-hidden": "true"}), s.name))) : null;
  const rows = series.flatMap((s) => s.points.map((p) => [s.name, fmt(p[0]), p[1].toFixed(yDigits)]));
  return el("figure", {className: "chart"}, chart, legend,
    el("details", {}, el("summary", {}, "The points as a table"), table(["version", xLabel + "#", yLabel + "#"],
      rows)));
}

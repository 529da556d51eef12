// Chart elements drawn as SVG (OPENMAIC-COURSE-FORMAT §3.3 `chart`): bar (vertical bars), column (horizontal
// bars), line, area, pie, ring, radar and scatter, with the element's theme colours, in its own box. The legend
// shows with more than one series, and always for pie and ring.

import { s } from "./util.js";

const PALETTE = ["#5b9bd5", "#ed7d31", "#a5a5a5", "#ffc000", "#4472c4", "#70ad47"];

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v) || v;
}

function label(x, y, text, attrs = {}) {
  return s("text", { x, y, "font-size": 11, ...attrs }, text);
}

function legend(el, names, colors, width, y) {
  const g = s("g", { class: "legend" });
  let x = 8;
  names.forEach((n, i) => {
    g.append(s("rect", { x, y: y - 8, width: 10, height: 10, fill: colors[i % colors.length], rx: 2 }),
      label(x + 14, y + 1, n, { fill: el.textColor || "#333" }));
    x += 24 + 7 * String(n).length;
    if (x > width - 40) x = 8;
  });
  return g;
}

function axes(el, box, max, labels, horizontal) {
  const g = s("g", { class: "axes" });
  const grid = el.lineColor || "#e5e7eb";
  const ink = el.textColor || "#555";
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    const txt = Number.isInteger(v) ? String(v) : v.toFixed(1);
    if (horizontal) {
      const x = box.x + (box.w * i) / 4;
      g.append(s("line", { x1: x, y1: box.y, x2: x, y2: box.y + box.h, stroke: grid }),
        label(x, box.y + box.h + 14, txt, { "text-anchor": "middle", fill: ink }));
    } else {
      const y = box.y + box.h - (box.h * i) / 4;
      g.append(s("line", { x1: box.x, y1: y, x2: box.x + box.w, y2: y, stroke: grid }),
        label(box.x - 4, y + 4, txt, { "text-anchor": "end", fill: ink }));
    }
  }
  const n = labels.length || 1;
  labels.forEach((l, i) => {
    if (horizontal) {
      g.append(label(box.x - 4, box.y + (box.h * (i + 0.5)) / n + 4, l, { "text-anchor": "end", fill: ink }));
    } else {
      g.append(label(box.x + (box.w * (i + 0.5)) / n, box.y + box.h + 14, l, { "text-anchor": "middle", fill: ink }));
    }
  });
  return g;
}

function cartesian(el, w, hgt, colors) {
  const { labels = [], series = [] } = el.data;
  const type = el.chartType;
  const stack = !!el.options?.stack && ["bar", "column", "area"].includes(type);
  const totals = labels.map((_, i) => series.reduce((sum, row) => sum + Math.max(0, row[i] || 0), 0));
  const max = niceMax(stack ? Math.max(0, ...totals) : Math.max(0, ...series.flat().filter(Number.isFinite)));
  const top = series.length > 1 ? 24 : 10;
  const box = { x: 40, y: top, w: w - 52, h: hgt - top - 22 };
  const horizontal = type === "column";
  const g = s("g", {}, axes(el, box, max, labels, horizontal));
  const n = labels.length || 1;
  const band = (horizontal ? box.h : box.w) / n;
  const base = labels.map(() => 0);
  series.forEach((row, si) => {
    const color = colors[si % colors.length];
    if (type === "bar" || type === "column") {
      const bw = stack ? band * 0.6 : (band * 0.7) / series.length;
      row.forEach((v, i) => {
        const len = ((Math.max(0, v) || 0) / max) * (horizontal ? box.w : box.h);
        const off = stack ? (base[i] / max) * (horizontal ? box.w : box.h) : 0;
        const pos = band * i + band * (stack ? 0.2 : 0.15) + (stack ? 0 : bw * si);
        g.append(horizontal
          ? s("rect", { x: box.x + off, y: box.y + pos, width: len, height: bw, fill: color })
          : s("rect", { x: box.x + pos, y: box.y + box.h - off - len, width: bw, height: len, fill: color }));
        if (stack) base[i] += Math.max(0, v) || 0;
      });
      return;
    }
    const pts = row.map((v, i) => {
      const acc = stack ? (base[i] += v || 0) : v || 0;
      return [box.x + band * (i + 0.5), box.y + box.h - (acc / max) * box.h];
    });
    let d = pts.map((p, i) => `${i ? "L" : "M"}${p[0]} ${p[1]}`).join(" ");
    if (el.options?.lineSmooth && pts.length > 2) {
      d = `M${pts[0][0]} ${pts[0][1]}` + pts.slice(1).map((p, i) => {
        const q = pts[i];
        const mx = (q[0] + p[0]) / 2;
        return ` C${mx} ${q[1]} ${mx} ${p[1]} ${p[0]} ${p[1]}`;
      }).join("");
    }
    if (type === "area" && pts.length) {
      const last = pts[pts.length - 1];
      g.append(s("path", { d: `${d} L${last[0]} ${box.y + box.h} L${pts[0][0]} ${box.y + box.h} Z`, fill: color,
        "fill-opacity": 0.35, stroke: "none" }));
    }
    g.append(s("path", { d, fill: "none", stroke: color, "stroke-width": 2 }));
    for (const [x, y] of pts) g.append(s("circle", { cx: x, cy: y, r: 3, fill: color }));
  });
  return g;
}

function pie(el, w, hgt, colors, ring) {
  const values = (el.data.series[0] || []).map((v) => Math.max(0, v || 0));
  const total = values.reduce((a, b) => a + b, 0) || 1;
  const cx = w / 2;
  const cy = (hgt + 20) / 2;
  const r = Math.max(4, Math.min(w, hgt - 24) / 2 - 6);
  const g = s("g", {});
  let a0 = -Math.PI / 2;
  values.forEach((v, i) => {
    const a1 = a0 + (v / total) * Math.PI * 2;
    const large = a1 - a0 > Math.PI ? 1 : 0;
    const p = (a, rr) => `${cx + rr * Math.cos(a)} ${cy + rr * Math.sin(a)}`;
    const d = v >= total
      ? `M${p(0, r)} A${r} ${r} 0 1 1 ${p(Math.PI, r)} A${r} ${r} 0 1 1 ${p(0, r)} Z`
      : `M${cx} ${cy} L${p(a0, r)} A${r} ${r} 0 ${large} 1 ${p(a1, r)} Z`;
    g.append(s("path", { d, fill: colors[i % colors.length], stroke: "#fff", "stroke-width": 1 }));
    a0 = a1;
  });
  if (ring) g.append(s("circle", { cx, cy, r: r * 0.55, fill: el.fill || "#fff" }));
  return g;
}

function radar(el, w, hgt, colors) {
  const { labels = [], series = [] } = el.data;
  const n = Math.max(3, labels.length);
  const cx = w / 2;
  const cy = (hgt + 20) / 2;
  const r = Math.max(4, Math.min(w, hgt - 24) / 2 - 18);
  const max = niceMax(Math.max(0, ...series.flat().filter(Number.isFinite)));
  const at = (i, k) => [cx + r * k * Math.sin((2 * Math.PI * i) / n), cy - r * k * Math.cos((2 * Math.PI * i) / n)];
  const g = s("g", {});
  for (const k of [0.25, 0.5, 0.75, 1]) {
    g.append(s("polygon", { points: Array.from({ length: n }, (_, i) => at(i, k).join(",")).join(" "), fill: "none",
      stroke: el.lineColor || "#e5e7eb" }));
  }
  labels.forEach((l, i) => {
    const [x, y] = at(i, 1.12);
    g.append(label(x, y + 4, l, { "text-anchor": "middle", fill: el.textColor || "#555" }));
  });
  series.forEach((row, si) => {
    const pts = row.map((v, i) => at(i, (v || 0) / max).join(",")).join(" ");
    g.append(s("polygon", { points: pts, fill: colors[si % colors.length], "fill-opacity": 0.3,
      stroke: colors[si % colors.length], "stroke-width": 2 }));
  });
  return g;
}

function scatter(el, w, hgt, colors) {
  const [xs = [], ys = []] = el.data.series;
  const maxX = niceMax(Math.max(0, ...xs));
  const maxY = niceMax(Math.max(0, ...ys));
  const box = { x: 40, y: 10, w: w - 52, h: hgt - 32 };
  const g = s("g", {}, axes(el, box, maxY, [], false));
  xs.forEach((x, i) => {
    g.append(s("circle", { cx: box.x + (x / maxX) * box.w, cy: box.y + box.h - ((ys[i] || 0) / maxY) * box.h, r: 4,
      fill: colors[0] }));
  });
  return g;
}

/** The chart as an SVG of the element's size (nothing for an empty series). */
export function drawChart(el) {
  const w = el.width;
  const hgt = el.height;
  const svg = s("svg", { width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}`, role: "img", class: "chart",
    "aria-label": (el.data?.legends || []).join(", ") || el.chartType });
  const data = el.data || {};
  if (!data.series?.length) return svg;
  // The theme's colours first; more series or slices than it has continue with the default palette.
  const colors = [...(el.themeColors || []), ...PALETTE.filter((c) => !(el.themeColors || []).includes(c))];
  const type = el.chartType;
  const drawn = type === "pie" || type === "ring" ? pie(el, w, hgt, colors, type === "ring")
    : type === "radar" ? radar(el, w, hgt, colors)
      : type === "scatter" ? scatter(el, w, hgt, colors) : cartesian(el, w, hgt, colors);
  svg.append(drawn);
  if (type === "pie" || type === "ring") svg.append(legend(el, data.labels || [], colors, w, 12));
  else if (type !== "scatter" && (data.legends || []).length > 1) svg.append(legend(el, data.legends, colors, w, 12));
  svg.dataset.chartType = type;
  return svg;
}

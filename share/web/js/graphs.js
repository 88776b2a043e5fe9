// A small line graph on a <canvas> (the last 60 samples), and the rates the
// guest page draws: from two successive vm.counters samples, per second of the
// guest's own uptime_ms (no clock skew between polls).

const POINTS = 60;

export function fmtRate(v, unit) {
  if (unit === 'B/s') {
    const u = ['B/s', 'KiB/s', 'MiB/s', 'GiB/s'];
    let i = 0;
    while (v >= 1024 && i < u.length - 1) {
      v /= 1024;
      i++;
    }
    return (v < 10 && i ? v.toFixed(1) : v.toFixed(0)) + ' ' + u[i];
  }
  const u = ['', 'k', 'M', 'G'];
  let i = 0;
  while (v >= 1000 && i < u.length - 1) {
    v /= 1000;
    i++;
  }
  const num = (v < 10 && i ? v.toFixed(1) : v.toFixed(0)) + u[i];
  return unit === '/s' ? num + '/s' : num + ' ' + unit;
}

// A round grid step for four lines up to at least v: 1, 2, 2.5 or 5 times a
// power of ten, or a power of two for bytes (256 KiB, 512 KiB, 1 MiB...).
function niceStep(v, unit) {
  const raw = v / 4;
  if (raw <= 0) return unit === 'B/s' ? 256 : 1;
  if (unit === 'B/s') return Math.max(1, 2 ** Math.ceil(Math.log2(raw)));
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return Math.max(1, m * p);
  return raw;
}

export class LineGraph {
  // series: [{label, color}]; unit: "exits/s" or "B/s"
  constructor(canvas, { title, unit, series }) {
    this.canvas = canvas;
    this.title = title;
    this.unit = unit;
    this.series = series;
    this.data = series.map(() => []);
    this.emptyText = 'no data';
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  push(values) {
    values.forEach((v, i) => {
      const d = this.data[i];
      d.push(v);
      if (d.length > POINTS) d.shift();
    });
    this.draw();
  }

  clear() {
    this.data = this.series.map(() => []);
    this.draw();
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth;
    const h = c.clientHeight;
    if (!w || !h) return;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = '12px system-ui, sans-serif';
    g.textBaseline = 'top';

    // Title and the latest value of each series (the legend).
    g.fillStyle = '#1e293b';
    g.font = '600 13px system-ui, sans-serif';
    g.fillText(this.title, 0, 0);
    g.font = '12px system-ui, sans-serif';
    let lx = w;
    for (let i = this.series.length - 1; i >= 0; i--) {
      const s = this.series[i];
      const d = this.data[i];
      const text = s.label + ' ' + (d.length ? fmtRate(d[d.length - 1], this.unit) : '-');
      lx -= g.measureText(text).width + 16;
      g.fillStyle = s.color;
      g.fillRect(lx, 3, 9, 9);
      g.fillStyle = '#475569';
      g.fillText(text, lx + 12, 1);
    }

    let peak = 0;
    for (const d of this.data) for (const v of d) peak = Math.max(peak, v);
    const step = niceStep(peak, this.unit);
    const max = step * 4;
    const axisUnit = this.unit === 'B/s' ? 'B/s' : '/s';
    let left = 0;
    for (let k = 0; k <= 4; k++) left = Math.max(left, g.measureText(fmtRate(step * k, axisUnit)).width);
    left = Math.ceil(left) + 10;
    const top = 26;
    const right = w - 4;
    const bottom = h - 8;

    // Grid: four lines with their values.
    g.strokeStyle = '#e2e8f0';
    g.lineWidth = 1;
    g.fillStyle = '#64748b';
    g.textBaseline = 'middle';
    g.textAlign = 'right';
    for (let k = 0; k <= 4; k++) {
      const y = Math.round(bottom - ((bottom - top) * k) / 4) + 0.5;
      g.beginPath();
      g.moveTo(left, y);
      g.lineTo(right, y);
      g.stroke();
      g.fillText(fmtRate(step * k, axisUnit), left - 6, y);
    }
    g.textAlign = 'left';

    const xs = (i) => left + ((right - left) * i) / (POINTS - 1);
    const ys = (v) => bottom - ((bottom - top) * v) / max;
    this.series.forEach((s, si) => {
      const d = this.data[si];
      if (!d.length) return;
      const off = POINTS - d.length;
      g.beginPath();
      d.forEach((v, i) => (i ? g.lineTo(xs(off + i), ys(v)) : g.moveTo(xs(off + i), ys(v))));
      g.strokeStyle = s.color;
      g.lineWidth = 1.8;
      g.stroke();
      // A light fill under the line.
      g.lineTo(xs(off + d.length - 1), bottom);
      g.lineTo(xs(off), bottom);
      g.closePath();
      g.globalAlpha = 0.12;
      g.fillStyle = s.color;
      g.fill();
      g.globalAlpha = 1;
    });
    if (!this.data.some((d) => d.length)) {
      g.fillStyle = '#94a3b8';
      g.textAlign = 'center';
      g.fillText(this.emptyText, (left + right) / 2, (top + bottom) / 2);
      g.textAlign = 'left';
    }
  }
}

function sumKeys(group, keys) {
  let total = 0;
  for (const src of Object.values(group || {})) {
    for (const k of keys) {
      const v = src && src[k];
      if (typeof v === 'number') total += v;
    }
  }
  return total;
}

// The totals a guest page graphs, from one vm.counters object.
export function counterTotals(c) {
  return {
    t: c.uptime_ms,
    exits: sumKeys(c.vcpu, ['exits_total']),
    diskRead: sumKeys(c.disk, ['read_bytes_total']),
    diskWrite: sumKeys(c.disk, ['write_bytes_total']),
    netRx: sumKeys(c.nic, ['rx_bytes_total']),
    netTx: sumKeys(c.nic, ['tx_bytes_total']),
  };
}

// Rates between two totals; null when no time passed or the guest restarted
// (its uptime or a counter went back).
export function counterRates(prev, cur) {
  if (!prev || !cur || typeof cur.t !== 'number' || typeof prev.t !== 'number') return null;
  const dt = (cur.t - prev.t) / 1000;
  if (dt <= 0) return null;
  const out = {};
  for (const k of Object.keys(cur)) {
    if (k === 't') continue;
    const d = cur[k] - prev[k];
    if (d < 0) return null;
    out[k] = d / dt;
  }
  return out;
}

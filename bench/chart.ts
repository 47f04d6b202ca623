/**
 * A small SVG line chart, written by hand so the benchmark needs no plotting
 * dependency: one panel per group of series, side by side, both axes on a
 * log scale (partition counts span 1 to 10 000; the three shuffles' speeds
 * differ by orders of magnitude), a legend, and the values as points with
 * tooltips (<title>).
 */

export interface Series {
  label: string;
  color: string;
  /** [x, y] points, x ascending; y > 0 */
  points: readonly (readonly [number, number])[];
  dashed?: boolean;
}

export interface Panel {
  title: string;
  series: readonly Series[];
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  /** caption under the panels */
  note?: string;
}

const PANEL_WIDTH = 440;
const PANEL_HEIGHT = 300;
const MARGIN = { left: 62, right: 16, top: 34, bottom: 46 };
const LEGEND_HEIGHT = 28;

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Powers of ten (and 2x, 5x between them when the range is short) covering [min, max]. */
function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  const from = Math.floor(Math.log10(min));
  const to = Math.ceil(Math.log10(max));
  const steps = to - from <= 2 ? [1, 2, 5] : [1];
  for (let e = from; e <= to; e++) for (const s of steps) ticks.push(s * 10 ** e);
  return ticks.filter((t) => t >= min * 0.999 && t <= max * 1.001);
}

function formatTick(v: number): string {
  if (v >= 1000) return `${v / 1000}k`.replace('.0k', 'k');
  if (v >= 1) return String(Number(v.toPrecision(3)));
  return String(Number(v.toPrecision(2)));
}

/** The chart as an SVG document. */
export function lineChart(panels: readonly Panel[], options: ChartOptions): string {
  const all = panels.flatMap((p) => p.series.flatMap((s) => s.points));
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y).filter((y) => y > 0);
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs);
  // y range: whole decades around the data, shared by the panels so they compare at a glance
  const yMin = 10 ** Math.floor(Math.log10(Math.min(...ys)));
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(...ys)));
  const plotW = PANEL_WIDTH - MARGIN.left - MARGIN.right;
  const plotH = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom;
  const xPos = (x: number) => MARGIN.left + ((Math.log10(x) - Math.log10(xMin)) / (Math.log10(xMax) - Math.log10(xMin) || 1)) * plotW;
  const yPos = (y: number) => MARGIN.top + plotH - ((Math.log10(y) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin) || 1)) * plotH;
  const width = PANEL_WIDTH * panels.length;
  const height = 30 + PANEL_HEIGHT + LEGEND_HEIGHT + (options.note ? 20 : 0);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  out.push(`<text x="${width / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">${escape(options.title)}</text>`);
  panels.forEach((panel, k) => {
    out.push(`<g transform="translate(${k * PANEL_WIDTH}, 30)">`);
    out.push(`<text x="${MARGIN.left + plotW / 2}" y="${MARGIN.top - 12}" text-anchor="middle" font-size="13">${escape(panel.title)}</text>`);
    out.push(`<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#999"/>`);
    for (const t of logTicks(yMin, yMax)) {
      const y = yPos(t).toFixed(1);
      out.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${y}" y2="${y}" stroke="#e4e4e4"/>`);
      out.push(`<text x="${MARGIN.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${formatTick(t)}</text>`);
    }
    for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
      const px = xPos(x).toFixed(1);
      out.push(`<line x1="${px}" x2="${px}" y1="${MARGIN.top}" y2="${MARGIN.top + plotH}" stroke="#f0f0f0"/>`);
      out.push(`<text x="${px}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${formatTick(x)}</text>`);
    }
    out.push(`<text x="${MARGIN.left + plotW / 2}" y="${PANEL_HEIGHT - 8}" text-anchor="middle">${escape(options.xLabel)}</text>`);
    out.push(`<text transform="translate(16, ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escape(options.yLabel)}</text>`);
    for (const s of panel.series) {
      const path = s.points.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${xPos(x).toFixed(1)},${yPos(y).toFixed(1)}`).join(' ');
      out.push(`<path d="${path}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
      for (const [x, y] of s.points) {
        out.push(`<circle cx="${xPos(x).toFixed(1)}" cy="${yPos(y).toFixed(1)}" r="3" fill="${s.color}"><title>${escape(`${s.label}, P=${x}: ${formatTick(y)}`)}</title></circle>`);
      }
    }
    out.push('</g>');
  });
  // legend: the series of the first panel (every panel has the same ones)
  const legendY = 30 + PANEL_HEIGHT + 14;
  let legendX = MARGIN.left;
  for (const s of panels[0]?.series ?? []) {
    out.push(`<line x1="${legendX}" x2="${legendX + 24}" y1="${legendY}" y2="${legendY}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    out.push(`<text x="${legendX + 30}" y="${legendY}" dominant-baseline="middle">${escape(s.label)}</text>`);
    legendX += 40 + s.label.length * 7;
  }
  if (options.note) out.push(`<text x="${MARGIN.left}" y="${legendY + 22}" font-size="11" fill="#555">${escape(options.note)}</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * The Runs view: one block per library run (a Tune search, a Train run, a dataset's
 * execution), the newest first.
 * Each block has the learning curves of a chosen metric, one line per member (trial, or
 * worker rank) with its marks (where a scheduler stopped it, checkpoints, restarts, errors),
 * and a table of the members: status, iteration, last metrics, config, what just happened.
 * A dataset's execution (library "data") is drawn as its operators instead, one lane each: a
 * bar of its blocks done and in flight (scaled to the busiest operator), its blocks, rows,
 * bytes and status.
 *
 * Renders only when the model's runs changed; the section is hidden while there are none, so a
 * notebook without a library run sees the panel as before.
 */

import { PanelModel } from './model';
import { CurvePoint } from './protocol';
import { MemberState, RunState, RunsState } from './runs';
import { el, formatBytes, setData, setText } from './views';

const SVG = 'http://www.w3.org/2000/svg';
/** Members listed in a run's table (all are drawn): more rows would cost layout, not news. */
export const MAX_ROWS = 200;
const WIDTH = 560;
const HEIGHT = 190;
const PAD = { left: 48, right: 12, top: 10, bottom: 26 };
/** bokeh's Category10, as the inline view draws: a member has the same colour in both. */
const COLORS = [
  '#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd',
  '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'
];
/** What a run's members are, per library (Tune's trials otherwise). */
const KINDS: Record<string, string> = { train: 'workers', data: 'operators', rllib: 'members' };
const MARK_TITLES: Record<string, string> = {
  stopped: 'stopped by the scheduler',
  error: 'failed',
  checkpoint: 'checkpoint',
  restart: 'restarted'
};

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const key in attrs) {
    node.setAttribute(key, String(attrs[key]));
  }
  return node;
}

export function formatValue(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) {
    return '–';
  }
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : String(+v.toPrecision(4));
}

/** "3 running, 2 terminated": members per status. */
export function statusSummary(run: RunState): string {
  const counts = new Map<string, number>();
  for (const m of run.members.values()) {
    counts.set(m.row.status, (counts.get(m.row.status) ?? 0) + 1);
  }
  return [...counts].map(([s, n]) => `${n} ${s.toLowerCase()}`).join(', ');
}

/** A member's curve of `metric`, ending at its latest report (kept even when thinned). */
export function curveOf(member: MemberState, metric: string): CurvePoint[] {
  const points = member.curves.get(metric) ?? [];
  const last = member.row.metrics[metric];
  const tail = points[points.length - 1];
  if (last !== undefined && tail && member.row.iteration > tail[1]) {
    return [...points, [member.row.reports, member.row.iteration, last]];
  }
  return points;
}

class RunBlock {
  readonly node = el('div', 'nbdist-run');
  private readonly title = el('h4', 'nbdist-subheading nbdist-run-title');
  private readonly select = el('select', 'nbdist-run-metric');
  private readonly chart = svg('svg', {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: 'nbdist-run-chart',
    role: 'img'
  });
  private readonly body = el('tbody', '');
  private readonly table = el('table', 'nbdist-table nbdist-run-table');
  private readonly lanes = el('div', 'nbdist-data-lanes');
  private readonly more = el('p', 'nbdist-note');
  private metric = '';

  constructor(id: string, private readonly redraw: () => void) {
    setData(this.node, 'runId', id);
    this.select.setAttribute('aria-label', 'Metric to plot');
    this.select.addEventListener('change', () => {
      this.metric = this.select.value;
      this.redraw();
    });
    const bar = el('div', 'nbdist-run-bar');
    bar.append(this.title, this.select);
    const table = this.table;
    const head = el('tr', '');
    for (const t of ['member', 'status', 'iter', 'metrics', 'config', 'last news']) {
      head.append(el('th', '', t));
    }
    table.append(el('thead', ''), this.body);
    table.tHead!.append(head);
    this.lanes.hidden = true;
    this.node.append(bar, this.chart, table, this.lanes, this.more);
  }

  render(run: RunState): void {
    const kind = KINDS[run.library] ?? 'trials';
    setText(this.title, `${run.library} · ${run.name}: ${run.members.size} ${kind} (${statusSummary(run)})`);
    const lanes = run.library === 'data';
    this.select.hidden = lanes;
    this.chart.style.display = lanes ? 'none' : '';
    this.table.hidden = lanes;
    this.lanes.hidden = !lanes;
    if (lanes) {
      this.drawLanes([...run.members.values()]);
      return;
    }
    if (!run.metrics.includes(this.metric)) {
      this.metric = run.metrics[0] ?? '';
    }
    const options = run.metrics.join('\u0000');
    if (this.select.dataset.options !== options) {
      this.select.replaceChildren(...run.metrics.map(m => el('option', '', m)));
      this.select.dataset.options = options;
    }
    this.select.value = this.metric;
    setData(this.node, 'metric', this.metric);
    const members = [...run.members.values()];
    this.drawChart(members);
    this.fillTable(run, members);
  }

  /** One lane per operator of a dataset's execution. */
  private drawLanes(members: MemberState[]): void {
    const count = (m: MemberState, key: string) => m.row.metrics[key] ?? 0;
    const most = Math.max(1, ...members.map(m => count(m, 'blocks') + count(m, 'in_flight')));
    const lanes = members.map(member => {
      const m = member.row;
      const blocks = count(member, 'blocks');
      const flying = count(member, 'in_flight');
      const lane = el('div', 'nbdist-data-lane');
      lane.style.cssText = 'display:flex;gap:8px;align-items:center;font-size:12px;margin:2px 0';
      setData(lane, 'lane', m.id);
      setData(lane, 'blocks', String(blocks));
      setData(lane, 'inFlight', String(flying));
      setData(lane, 'memberStatus', m.status);
      const bar = el('div', 'nbdist-data-lane-bar');
      bar.style.cssText = 'display:flex;width:120px;height:10px;flex:none;' +
        'background:var(--jp-layout-color3, #eee)';
      const done = el('span', 'nbdist-data-lane-done');
      done.style.cssText = `width:${(100 * blocks) / most}%;background:${COLORS[0]}`;
      const busy = el('span', 'nbdist-data-lane-busy');
      busy.style.cssText = `width:${(100 * flying) / most}%;background:#aec7e8`;
      bar.append(done, busy);
      const numbers = `${blocks.toLocaleString()} blocks · ` +
        `${count(member, 'rows').toLocaleString()} rows · ${formatBytes(count(member, 'bytes'))}` +
        (flying ? ` · ${flying} in flight` : '');
      lane.append(el('span', 'nbdist-data-lane-name', m.id), bar,
                  el('span', 'nbdist-data-lane-numbers', numbers),
                  el('span', `nbdist-run-status nbdist-run-${m.status.toLowerCase()}`, m.status));
      return lane;
    });
    this.lanes.replaceChildren(...lanes);
    setText(this.more, '');
    this.more.hidden = true;
  }

  private drawChart(members: MemberState[]): void {
    const curves = members.map(m => curveOf(m, this.metric));
    const xs = curves.flat().map(p => p[1]);
    const ys = curves.flat().map(p => p[2]).filter(Number.isFinite);
    const chart = this.chart;
    chart.replaceChildren();
    if (!ys.length) {
      chart.append(svg('text', { x: WIDTH / 2, y: HEIGHT / 2, 'text-anchor': 'middle', class: 'nbdist-run-empty' }));
      chart.lastChild!.textContent = 'no reports yet';
      return;
    }
    const [x0, x1] = [Math.min(...xs), Math.max(...xs, Math.min(...xs) + 1)];
    let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    if (y0 === y1) {
      [y0, y1] = [y0 - 1, y1 + 1];
    }
    const sx = (x: number) => PAD.left + ((x - x0) / (x1 - x0)) * (WIDTH - PAD.left - PAD.right);
    const sy = (y: number) => HEIGHT - PAD.bottom - ((y - y0) / (y1 - y0)) * (HEIGHT - PAD.top - PAD.bottom);
    this.drawAxes(sx, sy, [x0, x1], [y0, y1]);
    members.forEach((member, i) => {
      const color = COLORS[i % COLORS.length];
      const points = curves[i].filter(p => Number.isFinite(p[2]));
      const line = svg('polyline', {
        points: points.map(p => `${sx(p[1]).toFixed(1)},${sy(p[2]).toFixed(1)}`).join(' '),
        fill: 'none', stroke: color, 'stroke-width': 1.5, class: 'nbdist-run-curve',
        'data-member': member.row.id, 'data-points': points.length
      });
      line.append(svg('title', {}));
      line.lastChild!.textContent = `${member.row.id}: ${this.metric}`;
      chart.append(line);
      for (const mark of member.marks) {
        const near = points.find(p => p[1] >= mark[1]) ?? points[points.length - 1];
        if (!near) {
          continue;
        }
        chart.append(this.markShape(mark[2], sx(mark[1]), sy(near[2]), color, member.row.id, mark[3]));
      }
    });
  }

  private drawAxes(sx: (x: number) => number, sy: (y: number) => number,
                   xr: [number, number], yr: [number, number]): void {
    const chart = this.chart;
    const axis = { stroke: 'currentColor', 'stroke-opacity': 0.4 };
    chart.append(
      svg('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: sy(yr[0]), y2: sy(yr[0]), ...axis }),
      svg('line', { x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: HEIGHT - PAD.bottom, ...axis })
    );
    const label = (x: number, y: number, text: string, anchor: string) => {
      const t = svg('text', { x, y, 'text-anchor': anchor, class: 'nbdist-run-axis' });
      t.textContent = text;
      chart.append(t);
    };
    for (const f of [0, 0.5, 1]) {
      const y = yr[0] + f * (yr[1] - yr[0]);
      label(PAD.left - 4, sy(y) + 4, formatValue(y), 'end');
      const x = Math.round(xr[0] + f * (xr[1] - xr[0]));
      label(sx(x), HEIGHT - PAD.bottom + 14, String(x), 'middle');
    }
    label(WIDTH - PAD.right, HEIGHT - 2, 'iteration', 'end');
  }

  private markShape(kind: string, x: number, y: number, color: string, member: string,
                    note: string): SVGElement {
    const shape =
      kind === 'stopped' || kind === 'error'
        ? svg('path', { d: `M${x - 5},${y - 5}L${x + 5},${y + 5}M${x - 5},${y + 5}L${x + 5},${y - 5}`,
                        stroke: kind === 'error' ? '#d62728' : color, 'stroke-width': 2.5 })
        : svg('circle', { cx: x, cy: y, r: 4, fill: kind === 'checkpoint' ? '#fff' : color,
                          stroke: color, 'stroke-width': 2 });
    shape.setAttribute('class', `nbdist-run-mark nbdist-run-mark-${kind}`);
    shape.setAttribute('data-mark-kind', kind);
    shape.setAttribute('data-member', member);
    const title = svg('title', {});
    title.textContent = `${member}: ${note || MARK_TITLES[kind] || kind}`;
    shape.append(title);
    return shape;
  }

  private fillTable(run: RunState, members: MemberState[]): void {
    const hidden = members.length - MAX_ROWS;
    setText(this.more, hidden > 0 ? `and ${hidden} more` : '');
    this.more.hidden = hidden <= 0;
    const rows = members.slice(0, MAX_ROWS).map((member, i) => {
      const m = member.row;
      const tr = el('tr', 'nbdist-run-row');
      setData(tr, 'member', m.id);
      setData(tr, 'memberStatus', m.status);
      setData(tr, 'iteration', String(m.iteration));
      const name = el('td', 'nbdist-run-member');
      const swatch = el('span', 'nbdist-run-swatch');
      swatch.style.background = COLORS[i % COLORS.length];
      name.append(swatch, document.createTextNode(m.id));
      const metrics = run.metrics.filter(k => k in m.metrics)
        .map(k => `${k}=${formatValue(m.metrics[k])}`).join(' ');
      const config = Object.entries(m.config).map(([k, v]) => `${k}=${v}`).join(' ');
      tr.append(name, el('td', `nbdist-run-status nbdist-run-${m.status.toLowerCase()}`, m.status),
                el('td', '', String(m.iteration)), el('td', '', metrics || '–'),
                el('td', '', config || '–'), el('td', 'nbdist-run-note', m.note));
      return tr;
    });
    this.body.replaceChildren(...rows);
  }
}

export class RunsView {
  readonly node = el('section', 'nbdist-runs');
  private readonly list = el('div', 'nbdist-run-list');
  private readonly blocks = new Map<string, RunBlock>();
  private state: RunsState | null = null;
  private revision = -1;

  constructor(private readonly model: PanelModel) {
    this.node.setAttribute('aria-label', 'Runs');
    this.node.append(el('h3', 'nbdist-heading', 'Runs'), this.list);
    this.node.hidden = true;
  }

  render(force = false): void {
    const state = this.model.runs;
    if (!force && state === this.state && state.revision === this.revision) {
      return;
    }
    this.state = state;
    this.revision = state.revision;
    const runs = state.ordered();
    if (this.node.hidden !== (runs.length === 0)) {
      this.node.hidden = runs.length === 0;
    }
    setData(this.node, 'runs', String(runs.length));
    const blocks = runs.map(run => {
      let block = this.blocks.get(run.id);
      if (!block) {
        block = new RunBlock(run.id, () => this.render(true));
        this.blocks.set(run.id, block);
      }
      block.render(run);
      return block.node;
    });
    for (const id of [...this.blocks.keys()]) {
      if (!state.runs.has(id)) {
        this.blocks.delete(id);
      }
    }
    const current = Array.from(this.list.children);
    if (current.length !== blocks.length || blocks.some((b, i) => current[i] !== b)) {
      // Only when the order changed: re-inserting would close an open metric menu.
      this.list.replaceChildren(...blocks);
    }
  }
}

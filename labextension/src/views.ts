/**
 * The object store, waits and workers views. Each renders from the model when its revision
 * counter moved, updating rows in place (keyed by id) so a redraw at 10 Hz touches only the
 * elements whose text changed.
 */

import { PanelModel } from './model';
import { Actor, ClusterNode, StoredObject, Totals, Wait, Worker } from './protocol';

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function formatSeconds(s: number | null | undefined): string {
  if (s === null || s === undefined) {
    return '–';
  }
  return s < 1 ? `${(s * 1000).toFixed(1)} ms` : `${s.toFixed(2)} s`;
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** Writes only on change: an unchanged write still costs a style and layout pass. */
export function setText(node: Element, text: string): void {
  if (node.textContent !== text) {
    node.textContent = text;
  }
}

export function setData(node: HTMLElement, key: string, value: string): void {
  if (node.dataset[key] !== value) {
    node.dataset[key] = value;
  }
}

/** The header's totals: every state a task can be in, so the parts add up to the whole. */
export function totalsText(t: Totals): string {
  return (
    `${t.tasks} tasks: ${t.pending} pending, ${t.scheduled ?? 0} scheduled, ` +
    `${t.running} running, ${t.finished} finished, ${t.failed} failed · ` +
    `${t.objects} objects (${formatBytes(t.bytes)})`
  );
}

/** The workers' caption: a worker is busy while it runs a task, and only while it is up. */
export function workersCaption(workers: Worker[], actors: Actor[]): string {
  const busy = workers.filter(w => w.state === 'up' && w.task_name).length;
  const alive = actors.filter(a => a.state === 'alive').length;
  return (
    `${workers.length} workers, ${busy} busy now · ${alive} actors alive` +
    (actors.length > alive ? `, ${actors.length - alive} dead` : '')
  );
}

/** Keyed rows: create missing ones, update all, drop the rest, keep `order`. */
class Rows<T extends { id: string }> {
  private readonly rows = new Map<string, HTMLElement>();

  constructor(
    private readonly container: HTMLElement,
    private readonly create: (item: T) => HTMLElement,
    private readonly update: (row: HTMLElement, item: T) => void
  ) {}

  sync(items: T[]): void {
    const seen = new Set<string>();
    let previous: HTMLElement | null = null;
    for (const item of items) {
      seen.add(item.id);
      let row = this.rows.get(item.id);
      if (!row) {
        row = this.create(item);
        this.rows.set(item.id, row);
      }
      this.update(row, item);
      const expected: Element | null = previous
        ? previous.nextElementSibling
        : this.container.firstElementChild;
      if (expected !== row) {
        this.container.insertBefore(row, expected);
      }
      previous = row;
    }
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.remove();
        this.rows.delete(id);
      }
    }
  }
}

/** Rows the object table keeps in the DOM: more would cost layout time, not information. */
export const MAX_OBJECT_ROWS = 200;

export class ObjectsView {
  readonly node = el('section', 'nbdist-objects');
  private readonly capacity = el('div', 'nbdist-capacity');
  private readonly note = el('p', 'nbdist-note');
  private readonly body = el('tbody', '');
  private readonly rows: Rows<StoredObject>;
  private objectsRevision = -1;
  private clusterRevision = -1;
  private capacitySignature = '';

  constructor(
    private readonly model: PanelModel,
    private readonly taskName: (taskId: string | null) => string
  ) {
    this.node.setAttribute('aria-label', 'Object store');
    this.node.append(el('h3', 'nbdist-heading', 'Object store'), this.capacity, this.note);
    const table = el('table', 'nbdist-table');
    const head = el('tr', '');
    for (const title of [
      'object',
      'size',
      'made by',
      'owner',
      'locations',
      'where',
      'refs',
      'state'
    ]) {
      head.appendChild(el('th', '', title));
    }
    table.append(el('thead', ''), this.body);
    table.tHead!.appendChild(head);
    this.node.appendChild(table);
    this.rows = new Rows<StoredObject>(
      this.body,
      obj => {
        const row = el('tr', 'nbdist-object');
        row.dataset.objectId = obj.id;
        for (let i = 0; i < 8; i++) {
          row.appendChild(el('td', ''));
        }
        // Where the panel is narrow, owner, locations, where and refs fold into this line.
        row.appendChild(el('td', 'nbdist-object-more'));
        return row;
      },
      (row, obj) => {
        row.dataset.objectSize = String(obj.size);
        const cells = row.children;
        setText(cells[0], obj.id);
        setText(cells[1], formatBytes(obj.size));
        setText(cells[2], obj.task === null ? 'put' : this.taskName(obj.task));
        setText(cells[3], obj.owner);
        setText(cells[4], obj.locations.join(', '));
        setText(cells[5], obj.in_shared_memory ? 'shared memory' : 'inline');
        setText(cells[6], obj.refs === null || obj.refs === undefined ? '–' : String(obj.refs));
        const state = [obj.pinned ? 'pinned' : '', obj.spilled ? 'spilled' : 'in memory']
          .filter(Boolean)
          .join(', ');
        setText(cells[7], state);
        setText(cells[8], objectDetail(obj));
        row.dataset.objectRefs = String(obj.refs ?? '');
        row.dataset.objectPinned = String(Boolean(obj.pinned));
        row.dataset.objectSpilled = String(Boolean(obj.spilled));
      }
    );
  }

  render(): void {
    const model = this.model;
    const { objects, cluster } = model.revisions;
    if (objects === this.objectsRevision && cluster === this.clusterRevision) {
      return;
    }
    this.clusterRevision = cluster;
    const nodes = [...model.nodes.values()];
    const signature = JSON.stringify(nodes.map(n => [n.id, n.bytes, n.resources]));
    if (signature !== this.capacitySignature) {
      this.capacitySignature = signature;
      this.capacity.replaceChildren(...nodes.map(nodeCapacity));
    }
    setText(
      this.note,
      model.grouped
        ? `${model.totals.objects} live objects (${formatBytes(model.totals.bytes)}); past 2,000 ` +
            'the kernel sends per-node totals only.'
        : `${model.totals.objects} live objects, ${formatBytes(model.totals.bytes)}; ` +
            `${model.totals.objects_freed} freed` +
            (model.objects.size > MAX_OBJECT_ROWS
              ? `; the ${MAX_OBJECT_ROWS} newest are listed.`
              : '.')
    );
    if (objects !== this.objectsRevision) {
      this.objectsRevision = objects;
      const newest = [...model.objects.values()].sort((a, b) => b.created - a.created);
      this.rows.sync(newest.slice(0, MAX_OBJECT_ROWS));
    }
  }
}

/** The columns a narrow object table folds into one line under the row. */
function objectDetail(obj: StoredObject): string {
  const refs = obj.refs === null || obj.refs === undefined ? '–' : String(obj.refs);
  return [
    `owner ${obj.owner}`,
    `on ${obj.locations.join(', ') || '–'}`,
    obj.in_shared_memory ? 'shared memory' : 'inline',
    `refs ${refs}`
  ].join(' · ');
}

function nodeCapacity(node: ClusterNode): HTMLElement {
  const capacity = node.resources['object_store_memory'] ?? 0;
  const row = el('div', 'nbdist-capacity-row');
  row.dataset.nodeId = node.id;
  const used = capacity > 0 ? Math.min(1, node.bytes / capacity) : 0;
  const bar = el('div', 'nbdist-bar');
  const fill = el('div', 'nbdist-bar-fill');
  fill.style.transform = `scaleX(${used.toFixed(3)})`;
  bar.appendChild(fill);
  const text = capacity
    ? `${formatBytes(node.bytes)} of ${formatBytes(capacity)}`
    : formatBytes(node.bytes);
  row.append(el('span', 'nbdist-label', `node ${node.id}`), bar, el('span', 'nbdist-figure', text));
  return row;
}

/** What a wait's row says: its numbers named ("1 of 2 ready, asked for 1") and its end. */
export function waitText(wait: Wait): string {
  const counts = `${wait.ready} of ${wait.total} ready, asked for ${wait.num_returns}`;
  if (!wait.done) {
    return `${counts}: waiting`;
  }
  if (wait.timed_out) {
    return `${counts}: timed out after ${formatSeconds((wait.ended ?? wait.started) - wait.started)}`;
  }
  return `${counts}: done in ${formatSeconds((wait.ended ?? wait.started) - wait.started)}`;
}

/** How full a wait's bar is: the share ready while it waits; full once it returned as asked
 * (a wait for 1 of 2 that got its 1 is finished, not half done). */
export function waitFill(wait: Wait): number {
  if (wait.done && !wait.timed_out) {
    return 1;
  }
  return Math.min(1, wait.ready / Math.max(1, wait.total));
}

export class WaitsView {
  readonly node = el('section', 'nbdist-waits');
  private readonly list = el('ul', 'nbdist-wait-list');
  private readonly empty = el('p', 'nbdist-note', 'No get() or wait() yet.');
  private readonly rows: Rows<Wait>;
  private revision = -1;
  /** Why each long wait waits, as the kernel last answered (`nbdist.util.why`), by wait id. */
  private readonly whys = new Map<string, string>();

  constructor(
    private readonly model: PanelModel,
    cellLabel: (submitter: string | null) => string
  ) {
    this.node.setAttribute('aria-label', 'Waits');
    this.node.append(el('h3', 'nbdist-heading', 'Waits'), this.empty, this.list);
    this.rows = new Rows<Wait>(
      this.list,
      () => {
        const row = el('li', 'nbdist-wait');
        const bar = el('div', 'nbdist-bar');
        bar.append(el('div', 'nbdist-bar-fill'), el('div', 'nbdist-bar-mark'));
        const why = el('pre', 'nbdist-wait-why');
        why.hidden = true;
        row.append(el('span', 'nbdist-label'), bar, el('span', 'nbdist-figure'), why);
        return row;
      },
      (row, wait) => {
        row.dataset.waitReady = String(wait.ready);
        row.dataset.waitTotal = String(wait.total);
        row.dataset.waitDone = String(wait.done);
        row.classList.toggle('nbdist-done', wait.done && !wait.timed_out);
        row.classList.toggle('nbdist-timed-out', wait.done && wait.timed_out);
        const [label, bar, figure, why] = Array.from(row.children) as HTMLElement[];
        setText(label, `${wait.call}() ${cellLabel(wait.submitter)}`);
        const fill = bar.children[0] as HTMLElement;
        const mark = bar.children[1] as HTMLElement;
        const total = Math.max(1, wait.total);
        fill.style.transform = `scaleX(${waitFill(wait).toFixed(3)})`;
        // The mark shows where the wait returns while it waits; a finished bar needs none.
        mark.hidden = wait.done && !wait.timed_out;
        mark.style.left = `${((100 * wait.num_returns) / total).toFixed(1)}%`;
        mark.title = `returns when ${wait.num_returns} of ${wait.total} are ready`;
        setText(figure, waitText(wait));
        // A long wait says why it waits (the chain down to the cause) until it returns.
        const reason = wait.done ? undefined : this.whys.get(wait.id);
        why.hidden = reason === undefined;
        setText(why, reason ?? '');
      }
    );
  }

  /** The waits still blocked after `afterS` seconds (by the kernel's clock, `now`). */
  longWaits(now: number, afterS: number): Wait[] {
    return this.model.sortedWaits().filter(w => !w.done && now - w.started >= afterS);
  }

  /** The kernel's answer to why a wait waits: shown in its row from the next render. */
  setWhy(id: string, text: string): void {
    if (this.whys.get(id) !== text) {
      this.whys.set(id, text);
      this.revision = -1;
    }
  }

  render(): void {
    if (this.model.revisions.waits === this.revision) {
      return;
    }
    this.revision = this.model.revisions.waits;
    const waits = this.model.sortedWaits();
    for (const id of this.whys.keys()) {
      if (!this.model.waits.get(id) || this.model.waits.get(id)!.done) {
        this.whys.delete(id);
      }
    }
    this.empty.hidden = waits.length > 0;
    this.rows.sync(waits);
  }
}

const TIMELINE_WINDOW_S = 20;
const LANE_H = 16;

function hue(name: string): number {
  let h = 0;
  for (let i = 0; i < name.length; i++) {
    h = (h * 31 + name.charCodeAt(i)) % 360;
  }
  return h;
}

export class WorkersView {
  readonly node = el('section', 'nbdist-workers');
  private readonly nodes = el('div', 'nbdist-node-list');
  private readonly canvas = el('canvas', 'nbdist-timeline');
  private readonly caption = el('p', 'nbdist-note');
  private revision = -1;
  private nodesSignature = '';

  private width = 300;

  constructor(private readonly model: PanelModel) {
    // Reading the width while rendering would force a layout in every frame that draws.
    new ResizeObserver(entries => {
      const width = Math.floor(entries[0].contentRect.width);
      if (width > 0 && width !== this.width) {
        this.width = width;
        this.revision = -1;
      }
    }).observe(this.node);
    this.node.setAttribute('aria-label', 'Workers and nodes');
    this.node.append(
      el('h3', 'nbdist-heading', 'Workers and nodes'),
      this.nodes,
      el('h4', 'nbdist-subheading', `Task timeline per worker (last ${TIMELINE_WINDOW_S} s)`),
      this.canvas,
      this.caption
    );
  }

  render(): void {
    const model = this.model;
    if (model.revisions.cluster === this.revision) {
      return;
    }
    this.revision = model.revisions.cluster;
    const nodes = [...model.nodes.values()];
    const signature = JSON.stringify(
      nodes.map(n => [n.id, n.state, n.running, n.capacity, n.workers, n.utilization])
    );
    if (signature !== this.nodesSignature) {
      this.nodesSignature = signature;
      this.renderNodes(nodes);
    }
    this.drawTimeline();
  }

  private renderNodes(nodes: ClusterNode[]): void {
    this.nodes.replaceChildren(
      ...nodes.map(node => {
        const row = el('div', 'nbdist-node');
        row.dataset.nodeId = node.id;
        row.dataset.nodeUtilization = String(node.utilization);
        const bar = el('div', 'nbdist-bar');
        const fill = el('div', 'nbdist-bar-fill');
        fill.style.transform = `scaleX(${node.utilization.toFixed(3)})`;
        bar.appendChild(fill);
        row.append(
          el('span', 'nbdist-label', `node ${node.id} (${node.state})`),
          bar,
          el(
            'span',
            'nbdist-figure',
            `${node.running} running of ${node.capacity} CPUs · ${node.workers} workers`
          )
        );
        return row;
      })
    );
  }

  private drawTimeline(): void {
    const workers = [...this.model.workers.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    const width = Math.max(200, this.width - 4);
    const height = Math.max(1, workers.length) * (LANE_H + 4) + 14;
    const ratio = window.devicePixelRatio || 1;
    const pixelW = Math.floor(width * ratio);
    const pixelH = Math.floor(height * ratio);
    if (this.canvas.width !== pixelW || this.canvas.height !== pixelH) {
      this.canvas.width = pixelW;
      this.canvas.height = pixelH;
      this.canvas.style.width = `${width}px`;
      this.canvas.style.height = `${height}px`;
    }
    const ctx = this.canvas.getContext('2d');
    if (!ctx) {
      return;
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const labelW = 64;
    const end = this.model.kernelTime;
    const start = end - TIMELINE_WINDOW_S;
    const x = (t: number) => labelW + ((t - start) / TIMELINE_WINDOW_S) * (width - labelW);
    ctx.font = '10px sans-serif';
    ctx.textBaseline = 'middle';
    workers.forEach((worker, i) => {
      const y = i * (LANE_H + 4);
      ctx.fillStyle = worker.state === 'up' ? '#555' : '#aaa';
      ctx.fillText(`pid ${worker.pid}`, 2, y + LANE_H / 2);
      ctx.fillStyle = 'rgba(128,128,128,0.12)';
      ctx.fillRect(labelW, y, width - labelW, LANE_H);
      for (const [, name, t0, t1, failed] of this.model.workerSpans(worker.id)) {
        if (t0 === null || t1 === null || t1 < start) {
          continue;
        }
        ctx.fillStyle = failed ? '#eb5757' : `hsl(${hue(name)}, 55%, 50%)`;
        const a = x(Math.max(t0, start));
        ctx.fillRect(a, y, Math.max(1, x(t1) - a), LANE_H);
      }
      if (worker.state === 'up' && worker.task_name) {
        ctx.fillStyle = '#2f80ed';
        ctx.fillRect(x(end) - 3, y, 3, LANE_H);
      }
    });
    ctx.fillStyle = '#777';
    ctx.fillText(`−${TIMELINE_WINDOW_S} s`, labelW, height - 6);
    ctx.fillText('now', width - 24, height - 6);
    setText(this.caption, workersCaption(workers, [...this.model.actors.values()]));
  }
}

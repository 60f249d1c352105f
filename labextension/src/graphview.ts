/**
 * The task graph: drawn on a canvas, mirrored by a visually hidden list for tests and screen
 * readers.
 *
 * The canvas is redrawn only in an animation frame and only when the graph changed or the
 * view moved (drag to pan, wheel to zoom). Until the user moves the view it follows the graph
 * (fit to content); "Fit" goes back to following. Nodes sit on the model's grid cells, so
 * hover and click find a node with one lookup, and off-screen nodes are skipped.
 *
 * The list has one element per drawn task or group, updated in place (keyed by id), carrying
 * `data-task-state`, `data-task-name` and, for groups, `data-task-count`; focusing one and
 * pressing Enter (or clicking it) selects that node, as a click on the canvas does.
 */

import { GraphNode, PanelModel } from './model';
import { TaskState } from './protocol';

export const STATE_COLORS: Record<TaskState | 'object', string> = {
  pending: '#b0b7c3',
  scheduled: '#f2c94c',
  running: '#2f80ed',
  finished: '#27ae60',
  failed: '#eb5757',
  object: '#9b51e0'
};

const CELL_W = 170;
const CELL_H = 34;
const NODE_W = 140;
const NODE_H = 24;
/** List items created per frame: a burst of new tasks fills the list over a few frames
 * instead of holding one frame (and the kernel's next message) for its whole layout. */
const LIST_ITEMS_PER_FRAME = 400;

export interface GraphCallbacks {
  /** A node was clicked (or the background: undefined). */
  select(node: GraphNode | undefined): void;
  /** Text for the hover tooltip of a node. */
  describe(node: GraphNode): string;
}

export class GraphView {
  readonly node: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly list: HTMLUListElement;
  private readonly tooltip: HTMLElement;
  private readonly items = new Map<string, HTMLLIElement>();
  private scale = 1;
  private offsetX = 12;
  private offsetY = 12;
  private follow = true;
  private drag: { x: number; y: number; moved: boolean } | null = null;
  private drawnRevision = -1;
  private listBehind = false;
  private viewMoved = true;
  private stageSize: [number, number] = [0, 0];
  private selected: string | null = null;
  private hovered: GraphNode | undefined;

  constructor(
    private readonly model: PanelModel,
    private readonly callbacks: GraphCallbacks
  ) {
    this.node = document.createElement('section');
    this.node.className = 'nbdist-graph';
    this.node.setAttribute('aria-label', 'Task graph');
    const bar = document.createElement('div');
    bar.className = 'nbdist-graph-bar';
    const fit = document.createElement('button');
    fit.className = 'nbdist-button nbdist-fit';
    fit.textContent = 'Fit';
    fit.title = 'Fit the whole graph and follow it as it grows';
    fit.addEventListener('click', () => {
      this.follow = true;
      this.moved();
    });
    bar.appendChild(fit);
    const legend = document.createElement('span');
    legend.className = 'nbdist-legend';
    for (const state of Object.keys(STATE_COLORS) as (TaskState | 'object')[]) {
      const item = document.createElement('span');
      item.className = 'nbdist-legend-item';
      const dot = document.createElement('i');
      dot.style.background = STATE_COLORS[state];
      item.append(dot, state === 'object' ? 'put object' : state);
      legend.appendChild(item);
    }
    bar.appendChild(legend);
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'nbdist-graph-canvas';
    this.list = document.createElement('ul');
    this.list.className = 'nbdist-graph-nodes nbdist-visually-hidden';
    this.list.setAttribute('aria-label', 'Tasks');
    this.tooltip = document.createElement('div');
    this.tooltip.className = 'nbdist-tooltip';
    this.tooltip.hidden = true;
    const stage = document.createElement('div');
    stage.className = 'nbdist-graph-stage';
    stage.append(this.canvas, this.tooltip);
    this.node.append(bar, stage, this.list);
    new ResizeObserver(entries => {
      const rect = entries[0].contentRect;
      this.stageSize = [rect.width, rect.height];
      this.changed();
    }).observe(stage);
    this.listen();
  }

  /** Called when the view needs a frame (it moved, or a node was selected). */
  changed: () => void = () => undefined;

  private moved(): void {
    this.viewMoved = true;
    this.changed();
  }

  /** Highlight a node (by id) in the next frame. */
  setSelected(id: string | null): void {
    this.selected = id;
    this.moved();
  }

  /** Draw if anything changed since the last frame; cheap when nothing did. */
  render(): void {
    const revision = this.model.revisions.graph;
    const graphChanged = revision !== this.drawnRevision;
    if (graphChanged || this.listBehind) {
      this.listBehind = this.syncList(this.model.graphNodes());
      if (this.listBehind) {
        this.changed();
      }
    }
    if (!graphChanged && !this.viewMoved && !this.resized()) {
      return;
    }
    this.drawnRevision = revision;
    this.viewMoved = false;
    this.draw();
  }

  /** Match the canvas to the stage's size (known from a ResizeObserver, not read per frame). */
  private resized(): boolean {
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.floor(this.stageSize[0] * ratio));
    const h = Math.max(1, Math.floor(this.stageSize[1] * ratio));
    if (this.canvas.width === w && this.canvas.height === h) {
      return false;
    }
    this.canvas.width = w;
    this.canvas.height = h;
    this.canvas.style.width = `${this.stageSize[0]}px`;
    this.canvas.style.height = `${this.stageSize[1]}px`;
    return true;
  }

  private fit(width: number, height: number): void {
    const [cols, rows] = this.model.extent();
    if (cols === 0) {
      return;
    }
    const contentW = (cols - 1) * CELL_W + NODE_W;
    const contentH = (rows - 1) * CELL_H + NODE_H;
    this.scale = Math.min(1, (width - 24) / contentW, (height - 24) / contentH);
    this.offsetX = 12;
    this.offsetY = 12;
  }

  private draw(): void {
    this.resized();
    const ctx = this.canvas.getContext('2d');
    if (!ctx) {
      return;
    }
    const ratio = window.devicePixelRatio || 1;
    const width = this.canvas.width / ratio;
    const height = this.canvas.height / ratio;
    if (this.follow) {
      this.fit(width, height);
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const nodes = this.model.graphNodes();
    if (nodes.length === 0) {
      return;
    }
    const s = this.scale;
    ctx.setTransform(ratio * s, 0, 0, ratio * s, ratio * this.offsetX, ratio * this.offsetY);
    // The visible part of the world, for culling.
    const x0 = -this.offsetX / s - CELL_W;
    const y0 = -this.offsetY / s - CELL_H;
    const x1 = (width - this.offsetX) / s + CELL_W;
    const y1 = (height - this.offsetY) / s + CELL_H;

    ctx.strokeStyle = 'rgba(120, 130, 140, 0.55)';
    ctx.lineWidth = 1 / Math.max(s, 0.25);
    ctx.beginPath();
    for (const [from, to] of this.model.graphEdges()) {
      const a = this.model.graphNode(from);
      const b = this.model.graphNode(to);
      if (!a || !b) {
        continue;
      }
      const ax = a.col * CELL_W + NODE_W;
      const ay = a.row * CELL_H + NODE_H / 2;
      const bx = b.col * CELL_W;
      const by = b.row * CELL_H + NODE_H / 2;
      if (Math.max(ax, bx) < x0 || Math.min(ax, bx) > x1) {
        continue;
      }
      if (Math.max(ay, by) < y0 || Math.min(ay, by) > y1) {
        continue;
      }
      if (a === b) {
        // A group feeding itself (e.g. a reduction tree): a small loop above the node.
        ctx.moveTo(ax - 20, ay - NODE_H / 2);
        ctx.quadraticCurveTo(ax - 10, ay - NODE_H, ax, ay - NODE_H / 2);
        continue;
      }
      const mid = (ax + bx) / 2;
      ctx.moveTo(ax, ay);
      ctx.bezierCurveTo(mid, ay, mid, by, bx, by);
    }
    ctx.stroke();

    const labels = s >= 0.45;
    ctx.font = '11px sans-serif';
    ctx.textBaseline = 'middle';
    for (const node of nodes) {
      const x = node.col * CELL_W;
      const y = node.row * CELL_H;
      if (x > x1 || x < x0 || y > y1 || y < y0) {
        continue;
      }
      this.drawNode(ctx, node, x, y, labels);
    }
  }

  private drawNode(
    ctx: CanvasRenderingContext2D,
    node: GraphNode,
    x: number,
    y: number,
    labels: boolean
  ): void {
    if (node.kind === 'group') {
      // A bar split by state, so progress inside the group shows at a glance.
      let left = x;
      for (const state of ['finished', 'failed', 'running', 'scheduled', 'pending'] as const) {
        const n = node.counts[state] ?? 0;
        if (n > 0) {
          const w = (NODE_W * n) / Math.max(1, node.count);
          ctx.fillStyle = STATE_COLORS[state];
          ctx.fillRect(left, y, w, NODE_H);
          left += w;
        }
      }
    } else {
      ctx.fillStyle = STATE_COLORS[node.state];
      ctx.fillRect(x, y, node.kind === 'object' ? NODE_H : NODE_W, NODE_H);
    }
    if (node.id === this.selected) {
      ctx.strokeStyle = '#111';
      ctx.lineWidth = 2;
      ctx.strokeRect(x - 1, y - 1, NODE_W + 2, NODE_H + 2);
      ctx.lineWidth = 1;
    }
    if (labels) {
      ctx.fillStyle = node.state === 'pending' || node.kind === 'object' ? '#222' : '#fff';
      const text =
        node.kind === 'group'
          ? `${node.name} ×${node.count}`
          : node.kind === 'object'
          ? 'put'
          : node.name;
      ctx.fillText(text.length > 22 ? text.slice(0, 21) + '…' : text, x + 5, y + NODE_H / 2);
    }
  }

  /** Update the list in place; returns true when new items are still to be added. */
  private syncList(nodes: GraphNode[]): boolean {
    const seen = new Set<string>();
    let budget = LIST_ITEMS_PER_FRAME;
    let behind = false;
    for (const node of nodes) {
      if (node.kind === 'object') {
        continue;
      }
      seen.add(node.id);
      let item = this.items.get(node.id);
      if (!item) {
        if (budget === 0) {
          behind = true;
          continue;
        }
        budget--;
        item = document.createElement('li');
        item.className = 'nbdist-graph-node';
        item.dataset.nodeId = node.id;
        item.dataset.taskName = node.name;
        // Keyboard and assistive technology users select tasks here instead of on the canvas
        // (the list's own listeners serve every item).
        item.tabIndex = 0;
        this.items.set(node.id, item);
        this.list.appendChild(item);
      }
      if (item.dataset.taskState !== node.state) {
        item.dataset.taskState = node.state;
      }
      const label =
        node.kind === 'group'
          ? `${node.name}: ${node.count} tasks, ${summarize(node.counts)}`
          : `${node.name}: ${node.state}`;
      if (item.textContent !== label) {
        item.textContent = label;
      }
      if (node.kind === 'group') {
        const count = String(node.count);
        if (item.dataset.taskCount !== count) {
          item.dataset.taskCount = count;
        }
      }
    }
    for (const [id, item] of this.items) {
      if (!seen.has(id)) {
        item.remove();
        this.items.delete(id);
      }
    }
    return behind;
  }

  private chooseItem(target: EventTarget | null): void {
    const item = (target as HTMLElement | null)?.closest?.('li.nbdist-graph-node');
    const id = (item as HTMLElement | null)?.dataset.nodeId;
    if (id) {
      this.setSelected(id);
      this.callbacks.select(this.model.graphNode(id));
    }
  }

  private pick(event: MouseEvent): GraphNode | undefined {
    const rect = this.canvas.getBoundingClientRect();
    const wx = (event.clientX - rect.left - this.offsetX) / this.scale;
    const wy = (event.clientY - rect.top - this.offsetY) / this.scale;
    const col = Math.floor(wx / CELL_W);
    const row = Math.floor(wy / CELL_H);
    const node = this.model.nodeAt(col, row);
    if (!node) {
      return undefined;
    }
    const w = node.kind === 'object' ? NODE_H : NODE_W;
    const inside = wx - col * CELL_W <= w && wy - row * CELL_H <= NODE_H;
    return inside ? node : undefined;
  }

  private listen(): void {
    this.list.addEventListener('click', event => this.chooseItem(event.target));
    this.list.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        this.chooseItem(event.target);
      }
    });
    const canvas = this.canvas;
    canvas.addEventListener('pointerdown', event => {
      this.drag = { x: event.clientX, y: event.clientY, moved: false };
      canvas.setPointerCapture?.(event.pointerId);
    });
    canvas.addEventListener('pointermove', event => {
      const drag = this.drag;
      if (drag) {
        const dx = event.clientX - drag.x;
        const dy = event.clientY - drag.y;
        if (drag.moved || Math.abs(dx) + Math.abs(dy) > 3) {
          drag.moved = true;
          this.follow = false;
          this.offsetX += dx;
          this.offsetY += dy;
          drag.x = event.clientX;
          drag.y = event.clientY;
          this.moved();
        }
        return;
      }
      this.hover(event);
    });
    canvas.addEventListener('pointerup', event => {
      const drag = this.drag;
      this.drag = null;
      if (drag && !drag.moved) {
        const node = this.pick(event);
        this.setSelected(node?.id ?? null);
        this.callbacks.select(node);
      }
    });
    canvas.addEventListener('pointerleave', () => {
      this.tooltip.hidden = true;
      this.hovered = undefined;
    });
    canvas.addEventListener(
      'wheel',
      event => {
        event.preventDefault();
        const rect = canvas.getBoundingClientRect();
        const mx = event.clientX - rect.left;
        const my = event.clientY - rect.top;
        const factor = Math.exp(-event.deltaY * 0.0015);
        const scale = Math.min(4, Math.max(0.02, this.scale * factor));
        // Zoom about the pointer: the world point under it stays under it.
        this.offsetX = mx - ((mx - this.offsetX) * scale) / this.scale;
        this.offsetY = my - ((my - this.offsetY) * scale) / this.scale;
        this.scale = scale;
        this.follow = false;
        this.moved();
      },
      { passive: false }
    );
  }

  private hover(event: MouseEvent): void {
    const node = this.pick(event);
    if (!node) {
      this.tooltip.hidden = true;
      this.hovered = undefined;
      return;
    }
    if (node !== this.hovered) {
      this.hovered = node;
      this.tooltip.textContent = this.callbacks.describe(node);
    }
    const rect = this.canvas.getBoundingClientRect();
    this.tooltip.style.left = `${event.clientX - rect.left + 14}px`;
    this.tooltip.style.top = `${event.clientY - rect.top + 14}px`;
    this.tooltip.hidden = false;
  }
}

export function summarize(counts: Partial<Record<TaskState, number>>): string {
  return (Object.keys(counts) as TaskState[])
    .filter(state => (counts[state] ?? 0) > 0)
    .map(state => `${counts[state]} ${state}`)
    .join(', ');
}

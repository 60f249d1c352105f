/**
 * The task graph: drawn on a canvas, mirrored by a visually hidden list for tests and screen
 * readers.
 *
 * Readability comes first: every node carries its name, at a size that can be read. Nodes sit
 * on the model's grid cells; a cell is as wide as the longest label needs (measured, capped),
 * and "fit" never shrinks the drawing below MIN_FIT_SCALE: a graph larger than that scrolls
 * (the stage is a native scroll area whose spacer is the drawing's size, with the canvas held
 * in view by `position: sticky`). Ctrl/Cmd + wheel (a pinch on a touchpad), or the − / +
 * buttons, zoom about the pointer; the drawing is always kept inside the scroll range, so it
 * cannot be lost; "Fit" returns to the fitted view, which follows the graph as it grows.
 * The calls of an actor are drawn in that actor's lane: a band headed by the actor's name with
 * its calls in order, labelled by method. A library run's members (Tune's trials, Train's
 * ranks) have lanes of their own: headed by the member, with the call running its code, and
 * after the calls a line from the run's rows (status, iteration, last metric, what stopped
 * it). The libraries' own calls (polls, setup, checks) are left out unless "library calls" is
 * ticked in the toolbar.
 *
 * The canvas is redrawn only in an animation frame and only when the graph changed or the
 * view moved; off-screen nodes are skipped. Hover and click find a node with one lookup.
 *
 * The list has one element per drawn task or group, updated in place (keyed by id), carrying
 * `data-task-state`, `data-task-name`, `data-held` (held by step-through mode: drawn with a
 * dashed outline), `data-paused` (stopped in the debugger: a dotted orange outline), the grid cell (`data-col`, `data-row`), the actor or member of a
 * lane call (`data-lane`), a library's mark (`data-library`, `data-library-role`,
 * `data-member`) and, for groups, `data-task-count`; focusing one and pressing Enter
 * (or clicking it) selects that node, as a click on the canvas does.
 */

import { GraphNode, PanelModel, memberLane, memberTitle } from './model';
import { Lane, LANE_CALLS } from './layout';
import { TaskState } from './protocol';

export const STATE_COLORS: Record<TaskState | 'object', string> = {
  pending: '#b0b7c3',
  scheduled: '#f2c94c',
  running: '#2f80ed',
  finished: '#27ae60',
  failed: '#eb5757',
  object: '#9b51e0'
};

/** World units (CSS px at zoom 1). */
const NODE_H = 22;
const CELL_H = 32;
const GAP_X = 26;
const PAD = 6;
const FONT_PX = 12;
const FONT = `${FONT_PX}px sans-serif`;
const MIN_NODE_W = 40;
const MAX_NODE_W = 180;
const OBJECT_W = 30;
const MARGIN = 12;
/** The fitted view stops shrinking here (nodes ~19 px tall, labels ~10 px): beyond, it scrolls. */
export const MIN_FIT_SCALE = 0.85;
const MAX_SCALE = 3;
/** Labels are left out when they would be smaller than this on screen (zoomed far out). */
const MIN_LABEL_PX = 7;
const LANE_FILL = 'rgba(47, 128, 237, 0.08)';
/** The dashed outline of a task held by step-through mode. */
const HELD_STROKE = '#1f2933';
/** The outline of a task paused in the debugger (running, stopped at a breakpoint). */
const PAUSED_STROKE = '#d9480f';
const LANE_HEAD_FILL = '#dde3ec';
/** List items created per frame: a burst of new tasks fills the list over a few frames
 * instead of holding one frame (and the kernel's next message) for its whole layout. */
const LIST_ITEMS_PER_FRAME = 400;

export interface GraphCallbacks {
  /** A node was clicked (or the background: undefined). */
  select(node: GraphNode | undefined): void;
  /** Text for the hover tooltip of a node. */
  describe(node: GraphNode): string;
}

/** What a node says on the canvas: a lane call its method (the lane names the actor). */
export function nodeLabel(node: GraphNode, inLane: boolean): string {
  if (node.kind === 'group') {
    return `${node.name} ×${node.count}`;
  }
  if (node.kind === 'object') {
    return 'put';
  }
  if (node.library?.role === 'work') {
    return node.name; // the member (a trial, a rank)
  }
  return inLane ? node.name.slice(node.name.lastIndexOf('.') + 1) : node.name;
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}

export class GraphView {
  readonly node: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly stage: HTMLElement;
  private readonly sizer: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly tooltip: HTMLElement;
  private readonly items = new Map<string, HTMLLIElement>();
  private readonly widths = new Map<string, number>();
  private measure: CanvasRenderingContext2D | null = null;
  private scale = 1;
  private originX = MARGIN;
  private originY = MARGIN;
  private nodeW = MIN_NODE_W;
  private follow = true;
  private drag: { x: number; y: number; moved: boolean } | null = null;
  private drawnRevision = -1;
  private drawnRuns = -1;
  private listBehind = false;
  private viewMoved = true;
  private stageSize: [number, number] = [0, 0];
  private sizerSize: [number, number] = [0, 0];
  /** The stage's scroll offsets as last set or seen (reading them would force a layout). */
  private scroll: [number, number] = [0, 0];
  private selected: string | null = null;
  private hovered: GraphNode | undefined;

  constructor(
    private readonly model: PanelModel,
    private readonly callbacks: GraphCallbacks
  ) {
    this.node = document.createElement('section');
    this.node.className = 'nbdist-graph';
    this.node.setAttribute('aria-label', 'Task graph');
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'nbdist-graph-canvas';
    this.sizer = document.createElement('div');
    this.sizer.className = 'nbdist-graph-sizer';
    this.sizer.appendChild(this.canvas);
    this.stage = document.createElement('div');
    this.stage.className = 'nbdist-graph-stage';
    this.stage.appendChild(this.sizer);
    this.tooltip = document.createElement('div');
    this.tooltip.className = 'nbdist-tooltip';
    this.tooltip.hidden = true;
    const view = document.createElement('div');
    view.className = 'nbdist-graph-view';
    view.append(this.stage, this.tooltip);
    this.list = document.createElement('ul');
    this.list.className = 'nbdist-graph-nodes nbdist-visually-hidden';
    this.list.setAttribute('aria-label', 'Tasks');
    this.node.append(this.toolbar(), view, this.list);
    new ResizeObserver(entries => {
      const rect = entries[0].contentRect;
      this.stageSize = [rect.width, rect.height];
      this.moved();
    }).observe(this.stage);
    this.listen();
  }

  private toolbar(): HTMLElement {
    const bar = document.createElement('div');
    bar.className = 'nbdist-graph-bar';
    const button = (text: string, title: string, action: () => void) => {
      const b = document.createElement('button');
      b.className = 'nbdist-button';
      b.textContent = text;
      b.title = title;
      b.setAttribute('aria-label', title);
      b.addEventListener('click', action);
      bar.appendChild(b);
      return b;
    };
    button('−', 'Zoom out', () => this.zoomAt(1 / 1.25, ...this.center()));
    button('+', 'Zoom in', () => this.zoomAt(1.25, ...this.center()));
    button('Fit', 'Fit the graph (never below a readable size) and follow it as it grows', () =>
      this.fitView()
    ).classList.add('nbdist-fit');
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
    const held = document.createElement('span');
    held.className = 'nbdist-legend-item nbdist-legend-held';
    held.title = 'Held by step-through mode: ready, waiting for a step';
    const swatch = document.createElement('i');
    swatch.style.border = `2px dashed ${HELD_STROKE}`;
    swatch.style.boxSizing = 'border-box';
    held.append(swatch, 'held');
    legend.appendChild(held);
    const paused = document.createElement('span');
    paused.className = 'nbdist-legend-item nbdist-legend-paused';
    paused.title = 'Paused in the debugger (breakpoint()): %nbdist debug attaches';
    const mark = document.createElement('i');
    mark.style.border = `2px dotted ${PAUSED_STROKE}`;
    mark.style.boxSizing = 'border-box';
    paused.append(mark, 'paused');
    legend.appendChild(paused);
    bar.appendChild(legend);
    const toggle = document.createElement('label');
    toggle.className = 'nbdist-internal-toggle';
    toggle.title =
      "Show the calls nbdist's libraries make for their runs (polls, setup, checks); " +
      'hidden, a run shows as its trials or ranks';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.className = 'nbdist-show-internal';
    box.checked = this.model.showInternal;
    box.addEventListener('change', () => {
      this.model.setShowInternal(box.checked);
      this.onShowInternal(box.checked);
      this.changed();
    });
    this.internalBox = box;
    toggle.append(box, 'library calls');
    bar.appendChild(toggle);
    return bar;
  }

  /** Called when the view needs a frame (it moved, or a node was selected). */
  changed: () => void = () => undefined;

  /** Called when the user shows or hides the library calls. */
  onShowInternal: (on: boolean) => void = () => undefined;
  private internalBox: HTMLInputElement | null = null;

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
    if (this.internalBox && this.internalBox.checked !== this.model.showInternal) {
      this.internalBox.checked = this.model.showInternal; // set by the host (the kernel)
    }
    const revision = this.model.revisions.graph;
    // A member lane's line follows its run's rows: news there redraws the graph too.
    const runs = this.model.runs.revision;
    const graphChanged = revision !== this.drawnRevision || runs !== this.drawnRuns;
    if (graphChanged || this.listBehind) {
      this.listBehind = this.syncList(this.model.graphNodes());
      if (this.listBehind) {
        this.changed();
      }
    }
    if (!graphChanged && !this.viewMoved && !this.resized()) {
      return;
    }
    if (graphChanged) {
      this.nodeW = this.measureNodes();
      // The stylesheet sizes the graph to its drawing where the views are stacked.
      const height = `${Math.ceil(this.worldSize()[1] + 2 * MARGIN)}px`;
      if (this.node.style.getPropertyValue('--nbdist-graph-h') !== height) {
        this.node.style.setProperty('--nbdist-graph-h', height);
      }
    }
    this.drawnRevision = revision;
    this.drawnRuns = runs;
    this.viewMoved = false;
    this.draw();
  }

  private get cellW(): number {
    return this.nodeW + GAP_X;
  }

  /** Width of a label in world units (cached: a graph has few distinct names). */
  private textWidth(text: string): number {
    let w = this.widths.get(text);
    if (w === undefined) {
      this.measure ??= document.createElement('canvas').getContext('2d');
      if (this.measure) {
        this.measure.font = FONT;
      }
      w = this.measure ? this.measure.measureText(text).width : text.length * 7;
      if (this.widths.size > 4096) {
        this.widths.clear(); // group labels carry counts: new strings all the time
      }
      this.widths.set(text, w);
    }
    return w;
  }

  /** The node width every label fits in (up to MAX_NODE_W; longer ones are shortened). */
  private measureNodes(): number {
    let widest = 0;
    for (const node of this.model.graphNodes()) {
      if (node.kind !== 'object') {
        const inLane = node.kind === 'task' && !!this.model.tasks.get(node.id)?.actor;
        widest = Math.max(widest, this.textWidth(nodeLabel(node, inLane)));
      }
    }
    for (const [, label] of this.laneLabels()) {
      widest = Math.max(widest, this.textWidth(label));
    }
    return clamp(Math.ceil(widest) + 2 * PAD, MIN_NODE_W, MAX_NODE_W);
  }

  /** Each lane with what its head says: the member (a trial, a rank), the actor's name, or
   * its class and a number. */
  private laneLabels(): [Lane, string][] {
    const perClass = new Map<string, number>();
    return this.model.lanes().map(lane => {
      const member = this.model.laneMember(lane.key);
      if (member) {
        return [lane, memberTitle(member)];
      }
      const actor = this.model.actors.get(lane.key);
      const cls = actor?.class_name ?? 'actor';
      const n = (perClass.get(cls) ?? 0) + 1;
      perClass.set(cls, n);
      return [lane, actor?.name || `${cls} #${n}`];
    });
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

  /** The drawing's size in world units. */
  private worldSize(): [number, number] {
    const [cols, rows] = this.model.extent();
    if (cols === 0) {
      return [0, 0];
    }
    return [(cols - 1) * this.cellW + this.nodeW, (rows - 1) * CELL_H + NODE_H];
  }

  /** The scale at which the whole graph fits the stage (unbounded). */
  private fitScale(): number {
    const [w, h] = this.worldSize();
    const [vw, vh] = this.stageSize;
    if (w === 0 || vw === 0 || vh === 0) {
      return 1;
    }
    return Math.min((vw - 2 * MARGIN) / w, (vh - 2 * MARGIN) / h);
  }

  private center(): [number, number] {
    return [this.stageSize[0] / 2, this.stageSize[1] / 2];
  }

  private fitView(): void {
    this.follow = true;
    this.scale = clamp(this.fitScale(), MIN_FIT_SCALE, 1);
    this.place(MARGIN, MARGIN);
    this.moved();
  }

  /** Zoom by `factor` keeping the world point under (mx, my) (stage coordinates) in place. */
  private zoomAt(factor: number, mx: number, my: number): void {
    const lowest = Math.min(MIN_FIT_SCALE, this.fitScale());
    const scale = clamp(this.scale * factor, lowest, MAX_SCALE);
    const wx = (mx - this.originX) / this.scale;
    const wy = (my - this.originY) / this.scale;
    this.scale = scale;
    this.follow = false;
    this.node.dataset.scale = scale.toFixed(3);
    this.place(mx - wx * scale, my - wy * scale);
    this.moved();
  }

  /**
   * Put the world origin at (ox, oy) on the stage, as near as the drawing allows: a drawing
   * smaller than the stage stays wholly inside it; a larger one scrolls, and may not leave
   * the scroll range. Sizes the spacer so the scroll bars tell how much there is.
   */
  private place(ox: number, oy: number): void {
    const [w, h] = this.worldSize();
    const [vw, vh] = this.stageSize;
    const cw = w * this.scale + 2 * MARGIN;
    const ch = h * this.scale + 2 * MARGIN;
    const size: [number, number] = [Math.max(vw, cw), Math.max(vh, ch)];
    if (size[0] !== this.sizerSize[0] || size[1] !== this.sizerSize[1]) {
      this.sizerSize = size;
      this.sizer.style.width = `${size[0]}px`;
      this.sizer.style.height = `${size[1]}px`;
    }
    // Scrollable: origin = MARGIN - scroll, scroll in [0, c - v]. Else: inside the stage.
    const range = (v: number, c: number): [number, number] =>
      c > v ? [v - c + MARGIN, MARGIN] : [MARGIN, v - c + MARGIN];
    this.originX = clamp(ox, ...range(vw, cw));
    this.originY = clamp(oy, ...range(vh, ch));
    const left = cw > vw ? MARGIN - this.originX : 0;
    const top = ch > vh ? MARGIN - this.originY : 0;
    if (this.scroll[0] !== left || this.scroll[1] !== top) {
      this.scroll = [left, top];
      this.stage.scrollTo(left, top);
    }
  }

  /** The stage was scrolled (by the user, or by `place`). */
  private scrolled(): void {
    this.scroll = [this.stage.scrollLeft, this.stage.scrollTop];
    const [w, h] = this.worldSize();
    const [vw, vh] = this.stageSize;
    if (w * this.scale + 2 * MARGIN > vw) {
      this.originX = MARGIN - this.scroll[0];
    }
    if (h * this.scale + 2 * MARGIN > vh) {
      this.originY = MARGIN - this.scroll[1];
    }
    this.moved();
  }

  private draw(): void {
    this.resized();
    if (this.follow) {
      this.scale = clamp(this.fitScale(), MIN_FIT_SCALE, 1);
    }
    this.place(this.originX, this.originY);
    const ctx = this.canvas.getContext('2d');
    if (!ctx) {
      return;
    }
    const ratio = window.devicePixelRatio || 1;
    const [width, height] = this.stageSize;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const nodes = this.model.graphNodes();
    if (nodes.length === 0) {
      return;
    }
    const s = this.scale;
    ctx.setTransform(ratio * s, 0, 0, ratio * s, ratio * this.originX, ratio * this.originY);
    // The visible part of the world, for culling.
    const view = {
      x0: -this.originX / s - this.cellW,
      y0: -this.originY / s - CELL_H,
      x1: (width - this.originX) / s + this.cellW,
      y1: (height - this.originY) / s + CELL_H
    };
    const labels = FONT_PX * s >= MIN_LABEL_PX;
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    this.drawLanes(ctx, labels);
    this.drawEdges(ctx, view);
    for (const node of nodes) {
      const x = node.col * this.cellW;
      const y = node.row * CELL_H;
      if (x > view.x1 || x < view.x0 || y > view.y1 || y < view.y0) {
        continue;
      }
      this.drawNode(ctx, node, x, y, labels);
    }
  }

  /** Each actor's band across its rows, headed by the actor's name wherever a run of its
   * rows starts (a lane continued below other rows is named again). */
  private drawLanes(ctx: CanvasRenderingContext2D, labels: boolean): void {
    const bandW = LANE_CALLS * this.cellW + this.nodeW + 2 * PAD;
    for (const [lane, label] of this.laneLabels()) {
      const dead = this.model.actors.get(lane.key)?.state === 'dead';
      const rows = lane.rows;
      for (let i = 0; i < rows.length; i++) {
        const first = rows[i];
        while (i + 1 < rows.length && rows[i + 1] === rows[i] + 1) {
          i++;
        }
        const y = first * CELL_H;
        ctx.fillStyle = LANE_FILL;
        ctx.fillRect(-PAD, y - 4, bandW, (rows[i] - first) * CELL_H + NODE_H + 8);
        ctx.fillStyle = LANE_HEAD_FILL;
        ctx.fillRect(0, y, this.nodeW, NODE_H);
        if (labels) {
          ctx.fillStyle = dead ? '#6b7280' : '#1f2933';
          ctx.fillText(this.fitted(label, this.nodeW), PAD, y + NODE_H / 2);
        }
      }
      const note = this.model.memberNote(lane.key);
      if (note && labels) {
        // After the lane's calls on its last line: what the run says of this member.
        const line = lane.rows.length - 1;
        const used = lane.calls - line * LANE_CALLS;
        const x = (1 + used) * this.cellW;
        const room = bandW - x - PAD;
        if (room > 40) {
          ctx.fillStyle = '#1f2933';
          ctx.fillText(this.fitted(note, room), x, lane.rows[line] * CELL_H + NODE_H / 2);
        }
      }
    }
  }

  private drawEdges(
    ctx: CanvasRenderingContext2D,
    view: { x0: number; y0: number; x1: number; y1: number }
  ): void {
    ctx.strokeStyle = 'rgba(120, 130, 140, 0.6)';
    ctx.lineWidth = 1 / Math.max(this.scale, 0.25);
    ctx.beginPath();
    for (const [from, to] of this.model.graphEdges()) {
      const a = this.model.graphNode(from);
      const b = this.model.graphNode(to);
      if (!a || !b) {
        continue;
      }
      const ax = a.col * this.cellW + (a.kind === 'object' ? OBJECT_W : this.nodeW);
      const ay = a.row * CELL_H + NODE_H / 2;
      const bx = b.col * this.cellW;
      const by = b.row * CELL_H + NODE_H / 2;
      if (Math.max(ax, bx) < view.x0 || Math.min(ax, bx) > view.x1) {
        continue;
      }
      if (Math.max(ay, by) < view.y0 || Math.min(ay, by) > view.y1) {
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
  }

  /** `text`, shortened with an ellipsis if it does not fit a node `width` wide. */
  private fitted(text: string, width: number): string {
    const room = width - 2 * PAD;
    if (this.textWidth(text) <= room) {
      return text;
    }
    let n = text.length - 1;
    while (n > 1 && this.textWidth(text.slice(0, n) + '…') > room) {
      n--;
    }
    return text.slice(0, n) + '…';
  }

  private drawNode(
    ctx: CanvasRenderingContext2D,
    node: GraphNode,
    x: number,
    y: number,
    labels: boolean
  ): void {
    const w = node.kind === 'object' ? OBJECT_W : this.nodeW;
    if (node.kind === 'group') {
      // A bar split by state, so progress inside the group shows at a glance.
      let left = x;
      for (const state of ['finished', 'failed', 'running', 'scheduled', 'pending'] as const) {
        const n = node.counts[state] ?? 0;
        if (n > 0) {
          const part = (w * n) / Math.max(1, node.count);
          ctx.fillStyle = STATE_COLORS[state];
          ctx.fillRect(left, y, part, NODE_H);
          left += part;
        }
      }
    } else {
      ctx.fillStyle = STATE_COLORS[node.state];
      ctx.fillRect(x, y, w, NODE_H);
    }
    if (node.held) {
      ctx.save();
      ctx.setLineDash([4 / this.scale, 3 / this.scale]);
      ctx.strokeStyle = HELD_STROKE;
      ctx.lineWidth = 2 / this.scale;
      ctx.strokeRect(x + 1, y + 1, w - 2, NODE_H - 2);
      ctx.restore();
    }
    if (node.paused) {
      ctx.save();
      ctx.setLineDash([2 / this.scale, 2 / this.scale]);
      ctx.strokeStyle = PAUSED_STROKE;
      ctx.lineWidth = 3 / this.scale;
      ctx.strokeRect(x + 1.5, y + 1.5, w - 3, NODE_H - 3);
      ctx.restore();
    }
    if (node.id === this.selected) {
      ctx.strokeStyle = '#111';
      ctx.lineWidth = 2 / this.scale;
      ctx.strokeRect(x - 1, y - 1, w + 2, NODE_H + 2);
    }
    if (labels) {
      // Dark text on the light fills (pending grey, scheduled yellow), white on the others.
      const light = node.state === 'pending' || node.state === 'scheduled';
      ctx.fillStyle = light ? '#1f2933' : '#fff';
      const inLane = node.kind === 'task' && !!this.model.tasks.get(node.id)?.actor;
      const text = this.fitted(nodeLabel(node, inLane), w);
      ctx.fillText(text, node.kind === 'object' ? x + 3 : x + PAD, y + NODE_H / 2);
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
        item = this.newItem(node);
      }
      if (item.dataset.taskState !== node.state) {
        item.dataset.taskState = node.state;
      }
      const held = String(node.held === true);
      if (item.dataset.held !== held) {
        item.dataset.held = held;
      }
      const paused = String(Boolean(node.paused));
      if (item.dataset.paused !== paused) {
        item.dataset.paused = paused;
      }
      const member = node.library?.role === 'work' ? memberLane(node.library) : null;
      const note = member ? this.model.memberNote(member) : '';
      const label =
        node.kind === 'group'
          ? `${node.name}: ${node.count} tasks, ${summarize(node.counts)}`
          : `${node.name}: ${node.state}${node.held ? ' (held)' : ''}` +
            `${node.paused ? ' (paused in the debugger)' : ''}${note ? ` (${note})` : ''}`;
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

  private newItem(node: GraphNode): HTMLLIElement {
    const item = document.createElement('li');
    item.className = 'nbdist-graph-node';
    item.dataset.nodeId = node.id;
    item.dataset.taskName = node.name;
    // Cells never change once placed, so they are written once.
    item.dataset.col = String(node.col);
    item.dataset.row = String(node.row);
    const actor = node.kind === 'task' ? this.model.tasks.get(node.id)?.actor : null;
    const lane = node.library?.member ? memberLane(node.library) : actor;
    if (lane) {
      item.dataset.lane = lane;
    }
    if (node.library) {
      item.dataset.library = node.library.library;
      item.dataset.libraryRole = node.library.role;
      item.dataset.member = node.library.member;
    }
    // Keyboard and assistive technology users select tasks here instead of on the canvas
    // (the list's own listeners serve every item).
    item.tabIndex = 0;
    this.items.set(node.id, item);
    this.list.appendChild(item);
    return item;
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
    const wx = (event.clientX - rect.left - this.originX) / this.scale;
    const wy = (event.clientY - rect.top - this.originY) / this.scale;
    const col = Math.floor(wx / this.cellW);
    const row = Math.floor(wy / CELL_H);
    const node = this.model.nodeAt(col, row);
    if (!node) {
      return undefined;
    }
    const w = node.kind === 'object' ? OBJECT_W : this.nodeW;
    const inside = wx - col * this.cellW <= w && wy - row * CELL_H <= NODE_H;
    return inside ? node : undefined;
  }

  private listen(): void {
    this.list.addEventListener('click', event => this.chooseItem(event.target));
    this.list.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        this.chooseItem(event.target);
      }
    });
    this.stage.addEventListener('scroll', () => this.scrolled(), { passive: true });
    // A plain wheel scrolls (natively); with Ctrl/Cmd, or a touchpad pinch, it zooms.
    this.stage.addEventListener(
      'wheel',
      event => {
        if (!event.ctrlKey && !event.metaKey) {
          return;
        }
        event.preventDefault();
        const rect = this.canvas.getBoundingClientRect();
        const factor = Math.exp(-clamp(event.deltaY, -200, 200) * 0.002);
        this.zoomAt(factor, event.clientX - rect.left, event.clientY - rect.top);
      },
      { passive: false }
    );
    this.listenPointer();
  }

  /** Drag to pan, click to select, hover for the tooltip. */
  private listenPointer(): void {
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
          this.place(this.originX + dx, this.originY + dy);
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
    const x = event.clientX - rect.left;
    const y = event.clientY - rect.top;
    // Keep it on the stage's side away from the pointer, so it is never cut at the edge.
    const right = x > this.stageSize[0] / 2;
    this.tooltip.style.left = right ? '' : `${x + 14}px`;
    this.tooltip.style.right = right ? `${this.stageSize[0] - x + 14}px` : '';
    this.tooltip.style.top = `${y + 14}px`;
    this.tooltip.hidden = false;
  }
}

export function summarize(counts: Partial<Record<TaskState, number>>): string {
  return (Object.keys(counts) as TaskState[])
    .filter(state => (counts[state] ?? 0) > 0)
    .map(state => `${counts[state]} ${state}`)
    .join(', ');
}

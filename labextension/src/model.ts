/**
 * The panel's state: kernel messages folded into tasks, groups, objects, waits and workers.
 *
 * Pure (no DOM, no JupyterLab), so the unit tests drive it with hand-made messages. The rules
 * are those of docs/comm-protocol.md: a snapshot replaces everything, a delta upserts full
 * records and lists removed ids, so applying the same delta twice is harmless.
 *
 * The graph the views draw (`graphNodes`, `graphEdges`) is derived here: one node per task
 * (plus one per live `put` object a task takes) while the kernel sends tasks one by one, one node
 * per group (function and cell) with counts per state once it has switched to grouped mode.
 * Each node gets a grid cell from a StableLayout the first time it appears; the layout starts
 * afresh only when the kind of graph changes (tasks to groups), the kernel's session does, or
 * the library calls are shown or hidden.
 *
 * Library calls (a task or group with `library_call`, see nbdist.events.marks) are folded: the
 * plumbing of Tune, Train and the other libraries ('control': polls, setup, checks) is left out
 * of the graph unless `showInternal` is set, and a call that runs a member's code ('work': a
 * trial's run, a rank's loop) is drawn as that member, in a lane of its own (`memberLane`),
 * headed by the member and annotated from the run's rows (status, iteration, last metric,
 * what stopped it). Shown, a member's control calls join its lane.
 *
 * Views learn what changed from `revision` counters per section and redraw only those.
 */

import { AppState } from './appmetrics';
import { Lane, StableLayout } from './layout';
import { RunsState } from './runs';
import {
  Actor,
  ClusterNode,
  Delta,
  Group,
  KernelMessage,
  LibraryCall,
  RunMember,
  SCHEMA_VERSION,
  Snapshot,
  Span,
  StepStatus,
  StoredObject,
  Task,
  TaskState,
  Totals,
  Wait,
  Worker
} from './protocol';

/** Spans kept per worker for its timeline. */
export const MAX_SPANS = 400;

export type NodeKind = 'task' | 'group' | 'object';

export interface GraphNode {
  id: string;
  kind: NodeKind;
  name: string;
  state: TaskState | 'object';
  /** Tasks the node stands for (1 for a task or an object). */
  count: number;
  counts: Partial<Record<TaskState, number>>;
  submitter: string | null;
  col: number;
  row: number;
  /** Held by step-through mode: ready, waiting for a step. */
  held?: boolean;
  /** Stopped in the debugger: where (file:line (function)). */
  paused?: string;
  /** The mark of a library's call (see nbdist.events.marks). */
  library?: LibraryCall;
}

/** Whether a mark is a library's plumbing (hidden unless the library calls are shown). */
export function isInternal(mark: LibraryCall | undefined): boolean {
  return mark !== undefined && mark.role !== 'work';
}

/** The lane of a run's member (a trial, a rank) a library's call serves, if it serves one. */
export function memberLane(mark: LibraryCall | undefined): string | null {
  return mark && mark.member ? `member:${mark.library}:${mark.run}:${mark.member}` : null;
}

/** What a member is called in the graph: 'trial <id>' for Tune, else its own name. */
export function memberTitle(mark: LibraryCall): string {
  return mark.library === 'tune' ? `trial ${mark.member}` : mark.member;
}

/** A metric's value in a few digits. */
export function formatMetric(value: number): string {
  const abs = Math.abs(value);
  return abs !== 0 && (abs < 1e-3 || abs >= 1e5)
    ? value.toExponential(2)
    : String(+value.toPrecision(4));
}

/** [from node, to node, weight] */
export type GraphEdge = [string, string, number];

export interface Revisions {
  graph: number;
  objects: number;
  waits: number;
  cluster: number;
}

const EMPTY_TOTALS: Totals = {
  tasks: 0,
  pending: 0,
  scheduled: 0,
  running: 0,
  finished: 0,
  failed: 0,
  objects: 0,
  objects_freed: 0,
  bytes: 0,
  output_lines: 0,
  dropped_events: 0
};

/** The state a group is drawn in: what is happening in it now, else how it ended. */
export function groupState(counts: Partial<Record<TaskState, number>>): TaskState {
  for (const state of ['running', 'scheduled', 'pending', 'failed'] as TaskState[]) {
    if ((counts[state] ?? 0) > 0) {
      return state;
    }
  }
  return 'finished';
}

function upsert<T>(target: Map<string, T>, records: Record<string, T> | undefined): number {
  let n = 0;
  for (const key in records ?? {}) {
    target.set(key, records![key]);
    n++;
  }
  return n;
}

function remove<T>(target: Map<string, T>, ids: string[] | undefined): number {
  let n = 0;
  for (const id of ids ?? []) {
    n += target.delete(id) ? 1 : 0;
  }
  return n;
}

export class PanelModel {
  /** Set when the kernel speaks another schema: the panel shows it and ignores the rest. */
  versionError: string | null = null;
  /** The kernel's last `error` message. */
  kernelError: string | null = null;
  connected = false;
  grouped = false;
  cluster = false;
  seq = -1;
  /** Kernel wall clock (Unix seconds) of the last message applied. */
  kernelTime = 0;
  tasks = new Map<string, Task>();
  groups = new Map<string, Group>();
  groupEdges = new Map<string, GraphEdge>();
  objects = new Map<string, StoredObject>();
  waits = new Map<string, Wait>();
  workers = new Map<string, Worker>();
  nodes = new Map<string, ClusterNode>();
  actors = new Map<string, Actor>();
  totals: Totals = { ...EMPTY_TOTALS };
  /** Library runs (Tune searches, Train runs), with their own revision counter. */
  runs = new RunsState();
  /** Application metrics and placement groups, with their own revision counter. */
  app = new AppState();
  /** Step-through mode and how many tasks it holds. */
  step: StepStatus = { on: false, held: 0 };
  revisions: Revisions = { graph: 0, objects: 0, waits: 0, cluster: 0 };

  private layout = new StableLayout();
  private layoutGrouped = false;
  private internalShown = false;
  /** Member lane key -> its mark (the lanes of the last graph). */
  private memberMarks = new Map<string, LibraryCall>();
  private producer = new Map<string, string>();
  private spans = new Map<string, Map<string, Span>>();
  private graphCache: {
    revision: number;
    nodes: GraphNode[];
    edges: GraphEdge[];
    byId: Map<string, GraphNode>;
  } | null = null;

  /** Forget everything (a new kernel, or the comm closed). */
  reset(): void {
    const revisions = this.revisions;
    Object.assign(this, new PanelModel());
    this.revisions = {
      graph: revisions.graph + 1,
      objects: revisions.objects + 1,
      waits: revisions.waits + 1,
      cluster: revisions.cluster + 1
    };
  }

  /** Fold one kernel message in. */
  apply(msg: KernelMessage): void {
    if (msg.schema !== SCHEMA_VERSION) {
      this.versionError =
        `Kernel and panel versions differ: the kernel's nbdist speaks comm schema ${msg.schema}, ` +
        `this panel schema ${SCHEMA_VERSION}. Install the same nbdist version in the kernel's ` +
        'environment and in JupyterLab, then reload the page.';
      this.revisions.cluster++;
      return;
    }
    if (msg.type === 'error') {
      this.kernelError = msg.message;
      this.revisions.cluster++;
      return;
    }
    if (msg.type === 'snapshot') {
      this.applySnapshot(msg);
    } else {
      this.applyDelta(msg);
    }
    this.app.apply(msg);
    if (msg.step) {
      this.step = msg.step;
    } else if (msg.type === 'snapshot') {
      this.step = { on: false, held: 0 };
    }
    this.seq = msg.seq;
    this.kernelTime = msg.time;
    this.cluster = msg.cluster;
    this.totals = msg.totals;
  }

  private applySnapshot(msg: Snapshot): void {
    if (msg.grouped !== this.layoutGrouped || msg.seq < this.seq) {
      this.layout = new StableLayout();
      this.layoutGrouped = msg.grouped;
    }
    this.grouped = msg.grouped;
    this.tasks = new Map();
    this.producer = new Map();
    this.upsertTasks(msg.tasks);
    this.groups = new Map(Object.entries(msg.groups));
    this.groupEdges = new Map();
    this.upsertEdges(msg.group_edges);
    this.objects = new Map(Object.entries(msg.objects));
    this.waits = new Map(Object.entries(msg.waits));
    this.workers = new Map();
    this.upsertWorkers(msg.workers);
    this.nodes = new Map(Object.entries(msg.nodes));
    this.actors = new Map(Object.entries(msg.actors));
    this.runs.applySnapshot(msg.runs);
    this.revisions.graph++;
    this.revisions.objects++;
    this.revisions.waits++;
    this.revisions.cluster++;
  }

  private applyDelta(msg: Delta): void {
    if (msg.grouped && !this.grouped) {
      // The kernel announces the switch with a snapshot; a delta saying so first still folds.
      this.grouped = true;
      this.layout = new StableLayout();
      this.layoutGrouped = true;
    }
    const graph =
      this.upsertTasks(msg.tasks) +
      remove(this.tasks, msg.tasks_removed) +
      upsert(this.groups, msg.groups) +
      this.upsertEdges(msg.group_edges);
    if (graph) {
      this.revisions.graph++;
    }
    if (upsert(this.objects, msg.objects) + remove(this.objects, msg.objects_removed)) {
      this.revisions.objects++;
    }
    if (upsert(this.waits, msg.waits) + remove(this.waits, msg.waits_removed)) {
      this.revisions.waits++;
    }
    this.upsertWorkers(msg.workers);
    upsert(this.nodes, msg.nodes);
    upsert(this.actors, msg.actors);
    this.runs.applyDelta(msg.runs, msg.runs_removed);
    // Totals and the cluster flag come with every message: the header always redraws.
    this.revisions.cluster++;
  }

  private upsertTasks(records: Record<string, Task> | undefined): number {
    let n = 0;
    for (const id in records ?? {}) {
      const task = records![id];
      this.tasks.set(id, task);
      for (const ret of task.returns) {
        this.producer.set(ret, id);
      }
      n++;
    }
    return n;
  }

  private upsertEdges(edges: [string, string, number][] | undefined): number {
    for (const edge of edges ?? []) {
      this.groupEdges.set(`${edge[0]}\u0000${edge[1]}`, edge);
    }
    return edges?.length ?? 0;
  }

  private upsertWorkers(records: Record<string, Worker> | undefined): void {
    for (const id in records ?? {}) {
      const worker = records![id];
      this.workers.set(id, worker);
      let kept = this.spans.get(id);
      if (!kept) {
        kept = new Map();
        this.spans.set(id, kept);
      }
      for (const span of worker.spans ?? []) {
        kept.set(span[0], span);
      }
      // Maps iterate in insertion order: the oldest spans go first.
      for (const key of kept.keys()) {
        if (kept.size <= MAX_SPANS) {
          break;
        }
        kept.delete(key);
      }
    }
  }

  /** The finished spans of a worker's recent tasks, oldest first. */
  workerSpans(workerId: string): Span[] {
    return [...(this.spans.get(workerId)?.values() ?? [])];
  }

  /** The task that produces an object, if the panel knows it. */
  producerOf(objectId: string): string | undefined {
    return this.producer.get(objectId);
  }

  /** Nodes of the graph to draw, each with its (stable) grid cell. */
  graphNodes(): GraphNode[] {
    return this.graph().nodes;
  }

  /** Edges of the graph to draw. */
  graphEdges(): GraphEdge[] {
    return this.graph().edges;
  }

  private graph(): { nodes: GraphNode[]; edges: GraphEdge[]; byId: Map<string, GraphNode> } {
    if (this.graphCache?.revision === this.revisions.graph) {
      return this.graphCache;
    }
    const result = this.grouped ? this.groupGraph() : this.taskGraph();
    const byId = new Map(result.nodes.map(n => [n.id, n]));
    this.graphCache = { revision: this.revisions.graph, byId, ...result };
    return this.graphCache;
  }

  /** Whether the graph shows the libraries' own calls (polls, setup, checks). */
  get showInternal(): boolean {
    return this.internalShown;
  }

  /** Show or hide the libraries' own calls; the graph is laid out afresh. */
  setShowInternal(on: boolean): void {
    if (on === this.internalShown) {
      return;
    }
    this.internalShown = on;
    this.layout = new StableLayout();
    this.revisions.graph++;
    this.revisions.waits++;
  }

  /** The mark of the member whose lane this is (undefined: an actor's lane). */
  laneMember(key: string): LibraryCall | undefined {
    return this.memberMarks.get(key);
  }

  /** The run row of the member a lane stands for, if the run is known. */
  memberRow(mark: LibraryCall): RunMember | undefined {
    return this.runs.runs.get(`${mark.library}:${mark.run}`)?.members.get(mark.member)?.row;
  }

  /** A member lane's line from its run's row: status, iteration, last metric, news. */
  memberNote(key: string): string {
    const mark = this.memberMarks.get(key);
    const row = mark ? this.memberRow(mark) : undefined;
    if (!mark || !row) {
      return '';
    }
    const parts = [row.status.toLowerCase(), `iter ${row.iteration}`];
    const run = this.runs.runs.get(`${mark.library}:${mark.run}`);
    const metric = run?.metrics.find(m => m in row.metrics) ?? Object.keys(row.metrics)[0];
    if (metric !== undefined) {
      parts.push(`${metric} ${formatMetric(row.metrics[metric])}`);
    }
    if (row.note) {
      parts.push(row.note);
    }
    return parts.join(' · ');
  }

  private shown(task: Task | undefined): task is Task {
    return task !== undefined && (this.internalShown || !isInternal(task.library_call));
  }

  private taskGraph(): { nodes: GraphNode[]; edges: GraphEdge[] } {
    const layout = this.layout;
    const nodes: GraphNode[] = [];
    const edges: GraphEdge[] = [];
    const tasks = [...this.tasks.values()]
      .filter(task => this.shown(task))
      .sort((a, b) => (a.submitted ?? 0) - (b.submitted ?? 0) || (a.id < b.id ? -1 : 1));
    const objectNodes = new Set<string>();
    this.memberMarks = new Map();
    for (const task of tasks) {
      const preds: string[] = [];
      for (const dep of task.deps) {
        const producer = this.producer.get(dep);
        if (producer !== undefined) {
          if (this.shown(this.tasks.get(producer))) {
            preds.push(producer);
          }
          continue;
        }
        if (this.objects.get(dep)?.task !== null) {
          continue; // made by a task the panel no longer lists, or freed
        }
        // A `put` object between the driver and this task.
        const oid = `object:${dep}`;
        preds.push(oid);
        if (!objectNodes.has(oid)) {
          objectNodes.add(oid);
          const cell = layout.place(oid, []);
          nodes.push({
            id: oid,
            kind: 'object',
            name: dep,
            state: 'object',
            count: 1,
            counts: {},
            submitter: task.submitter,
            col: cell.col,
            row: cell.row
          });
        }
      }
      const mark = task.library_call;
      const member = memberLane(mark);
      if (member !== null) {
        this.memberMarks.set(member, mark!);
      }
      const cell = layout.place(task.id, preds, member ?? task.actor);
      nodes.push({
        id: task.id,
        kind: 'task',
        name: mark?.role === 'work' ? memberTitle(mark) : task.name,
        library: mark,
        state: task.state,
        count: 1,
        counts: { [task.state]: 1 },
        submitter: task.submitter,
        col: cell.col,
        row: cell.row,
        held: task.held === true,
        ...(task.paused ? { paused: task.paused } : {})
      });
      const seen = new Set<string>();
      for (const pred of preds) {
        if (!seen.has(pred)) {
          seen.add(pred);
          edges.push([pred, task.id, 1]);
        }
      }
    }
    return { nodes, edges };
  }

  private groupGraph(): { nodes: GraphNode[]; edges: GraphEdge[] } {
    const layout = this.layout;
    const preds = new Map<string, string[]>();
    const edges: GraphEdge[] = [];
    for (const edge of this.groupEdges.values()) {
      edges.push(edge);
      if (edge[0] !== edge[1]) {
        const list = preds.get(edge[1]) ?? [];
        list.push(edge[0]);
        preds.set(edge[1], list);
      }
    }
    const groups = [...this.groups.values()]
      .filter(group => this.internalShown || !isInternal(group.library_call))
      .sort((a, b) => Number(a.id.slice(1)) - Number(b.id.slice(1)));
    const shown = new Set(groups.map(group => group.id));
    const kept = edges.filter(([a, b]) => shown.has(a) && shown.has(b));
    edges.length = 0;
    edges.push(...kept);
    const nodes = groups.map(group => {
      const cell = layout.place(group.id, preds.get(group.id) ?? []);
      return {
        id: group.id,
        kind: 'group' as NodeKind,
        name: group.name,
        state: groupState(group.counts),
        count: group.total,
        counts: group.counts,
        submitter: group.submitter,
        col: cell.col,
        row: cell.row,
        library: group.library_call
      };
    });
    return { nodes, edges };
  }

  /** The graph node drawn in a grid cell. */
  nodeAt(col: number, row: number): GraphNode | undefined {
    const id = this.layout.at(col, row);
    return id === undefined ? undefined : this.graph().byId.get(id);
  }

  /** A graph node by id. */
  graphNode(id: string): GraphNode | undefined {
    return this.graph().byId.get(id);
  }

  /** The actors' lanes of the task graph (none in grouped mode). */
  lanes(): Lane[] {
    this.graph();
    return this.grouped ? [] : this.layout.lanes();
  }

  /** Grid extent of the graph: [columns, rows]. */
  extent(): [number, number] {
    this.graph();
    return [this.layout.columns, this.layout.rows];
  }

  /** Active waits first (oldest first), then finished ones (newest first). */
  sortedWaits(): Wait[] {
    // A library's own waits (a Tune controller waits on its trials' polls) are plumbing too.
    const waits = [...this.waits.values()].filter(
      w => this.internalShown || !isInternal(w.library_call)
    );
    const active = waits.filter(w => !w.done).sort((a, b) => a.started - b.started);
    const done = waits.filter(w => w.done).sort((a, b) => (b.ended ?? 0) - (a.ended ?? 0));
    return [...active, ...done];
  }
}

/**
 * The `nbdist` comm schema as types: the TypeScript mirror of nbdist/jupyter/model.py.
 * docs/comm-protocol.md is the contract; a change there bumps SCHEMA_VERSION in both places.
 */

export const SCHEMA_VERSION = 5;
export const COMM_TARGET = 'nbdist';

export type TaskState = 'pending' | 'scheduled' | 'running' | 'finished' | 'failed';

/** Every state the panel can draw, in the order of a task's life. */
export const TASK_STATES: readonly TaskState[] = [
  'pending',
  'scheduled',
  'running',
  'finished',
  'failed'
];

/** The mark of a call made by one of nbdist's libraries (nbdist.events.marks). */
export interface LibraryCall {
  library: string;
  /** the run it serves (a search's, a training run's name), '' if none */
  run: string;
  /** the member it serves (a trial id, 'rank N'), '' if none */
  member: string;
  /** 'control': plumbing, folded away by default; 'work': runs the member's code */
  role: string;
}

export interface Task {
  id: string;
  name: string;
  state: TaskState;
  deps: string[];
  dep_tasks: string[];
  returns: string[];
  parent: string | null;
  actor: string | null;
  submitter: string | null;
  group: string;
  node: string | null;
  worker: number | null;
  submitted: number | null;
  started: number | null;
  ended: number | null;
  error_type: string | null;
  error: string | null;
  attempt: number;
  stdout: string[];
  /** Held by step-through mode: ready, waiting for a step. */
  held?: boolean;
  /** Present while it is stopped in the debugger (breakpoint(), a live post-mortem): where. */
  paused?: string;
  /** Present when one of nbdist's libraries made the call. */
  library_call?: LibraryCall;
}

/** Step-through mode: each ready task is held until a step releases it. */
export interface StepStatus {
  on: boolean;
  /** Tasks held now. */
  held: number;
}

export interface Group {
  id: string;
  name: string;
  submitter: string | null;
  counts: Partial<Record<TaskState, number>>;
  total: number;
  /** Present when one of nbdist's libraries made the group's calls. */
  library_call?: LibraryCall;
}

/** [from group, to group, tasks of `to` that took a ref made by `from`] */
export type GroupEdge = [string, string, number];

export interface StoredObject {
  id: string;
  size: number;
  node: string;
  locations: string[];
  owner: string;
  task: string | null;
  in_shared_memory: boolean;
  state: string;
  created: number;
  /** refs the driver holds (null: not known) */
  refs?: number | null;
  /** an argument of a task that has not finished */
  pinned?: boolean;
  /** moved to disk by the node (read back when needed) */
  spilled?: boolean;
}

export interface Wait {
  id: string;
  call: 'get' | 'wait';
  num_returns: number;
  total: number;
  ready: number;
  submitter: string | null;
  done: boolean;
  timed_out: boolean;
  started: number;
  ended: number | null;
  /** Present when one of nbdist's libraries waits (a Tune or Train controller). */
  library_call?: LibraryCall;
}

/** [task id, function name, started, ended, failed] */
export type Span = [string, string, number | null, number | null, boolean];

export interface Worker {
  id: string;
  node: string;
  pid: number;
  state: 'up' | 'down';
  task: string | null;
  task_name: string | null;
  tasks_done: number;
  busy_s: number;
  spans: Span[];
}

export interface ClusterNode {
  id: string;
  state: 'up' | 'down';
  address: string | null;
  resources: Record<string, number>;
  workers: number;
  running: number;
  capacity: number;
  utilization: number;
  objects: number;
  bytes: number;
  shm_bytes: number;
}

export interface Actor {
  id: string;
  class_name: string;
  name: string | null;
  state: 'alive' | 'dead';
  restarts: number;
  reason: string | null;
}

export interface Totals {
  tasks: number;
  pending: number;
  /** arguments ready, waiting for a worker */
  scheduled: number;
  running: number;
  finished: number;
  failed: number;
  objects: number;
  objects_freed: number;
  bytes: number;
  output_lines: number;
  dropped_events: number;
}

/** [report number, iteration, value]: a point of a learning curve */
export type CurvePoint = [number, number, number];
/** [report number, iteration, kind, note]; kind: stopped, error, checkpoint, restart */
export type RunMark = [number, number, string, string];

/** A member of a library run: a Tune trial, or a Train worker ("rank N"). */
export interface RunMember {
  id: string;
  status: string;
  iteration: number;
  config: Record<string, string>;
  metrics: Record<string, number>;
  note: string;
  /** records folded so far: points and marks numbered above the last held are news */
  reports: number;
  /** metric -> points (all kept in a snapshot, the news in a delta) */
  curves: Record<string, CurvePoint[]>;
  marks: RunMark[];
  updated: number;
}

/** A Tune search or a Train run, keyed "<library>:<run>". */
export interface Run {
  id: string;
  library: string;
  name: string;
  /** the metrics followed as curves */
  metrics: string[];
  /** every member in a snapshot, the changed ones in a delta */
  members: Record<string, RunMember>;
  updated: number;
}

/** A row of nbdist.util.metrics.snapshot(): one metric with one set of tag values. */
export interface AppMetric {
  name: string;
  kind: 'counter' | 'gauge' | 'histogram';
  description: string;
  tags: Record<string, string>;
  /** counters and gauges */
  value?: number;
  /** histograms: values observed, their sum, and the count per bucket (one bucket more than
   * boundaries: the values above the last) */
  count?: number;
  sum?: number;
  boundaries?: number[];
  buckets?: number[];
}

export interface PlacementGroup {
  id: string;
  name: string;
  strategy: string;
  state: string;
  bundles: Record<string, number>[];
}

interface StateMessage {
  schema: number;
  seq: number;
  time: number;
  grouped: boolean;
  cluster: boolean;
  tasks: Record<string, Task>;
  groups: Record<string, Group>;
  group_edges: GroupEdge[];
  objects: Record<string, StoredObject>;
  waits: Record<string, Wait>;
  workers: Record<string, Worker>;
  nodes: Record<string, ClusterNode>;
  actors: Record<string, Actor>;
  totals: Totals;
  /** every event record published before this time is in the message (Unix seconds) */
  as_of?: number;
  /** on deltas with new records: each was published after this time */
  news_since?: number;
  /** library runs (snapshot: all; delta: those that changed) */
  runs?: Record<string, Run>;
  /** application metrics and placement groups: whole lists (in a delta only when changed) */
  metrics?: AppMetric[];
  placement_groups?: PlacementGroup[];
  step?: StepStatus;
}

export interface Snapshot extends StateMessage {
  type: 'snapshot';
}

export interface Delta extends StateMessage {
  type: 'delta';
  tasks_removed: string[];
  objects_removed: string[];
  waits_removed: string[];
  /** runs that aged out */
  runs_removed?: string[];
}

export interface ErrorMessage {
  schema: number;
  type: 'error';
  message: string;
}

export type KernelMessage = Snapshot | Delta | ErrorMessage;

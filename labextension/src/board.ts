/**
 * The board: every view of nbdist (summary, step controls, task graph, runs, details, waits,
 * objects, workers and timeline, metrics) on one element, rendered from a PanelModel. Pure DOM:
 * no JupyterLab, so the same board is the JupyterLab panel (panel.ts, which feeds it from the
 * kernel's comm) and the inline widget of every notebook frontend (widget.ts, fed over an
 * anywidget's comm). What differs between the two is behind `BoardHost`: how the kernel is
 * reached (status, refresh, step commands) and how a cell is named and found.
 *
 * Messages from the kernel only update the model and ask for an animation frame; each frame
 * renders the views whose part of the model changed (at most one frame per display refresh,
 * however many messages came in between). After rendering, the root element records the
 * kernel time and sequence number of the state now on screen (`data-rendered-time`,
 * `data-rendered-seq`) so a benchmark can measure how far the view is behind the kernel.
 *
 * While a running task is selected, the details show its current Python stack, asked of the
 * kernel every `STACK_REFRESH_MS` (`%nbdist stack`'s answer); a wait blocked longer than
 * `WHY_AFTER_S` says in its row why it waits (`%nbdist why`'s answer), asked again every
 * `WHY_REFRESH_MS` until it returns. Both go through `BoardHost.debug`.
 */

import type { DebugQuery, DebugReply, LinkStatus, StepCommand, StepReply } from './connection';
import { GraphView, summarize } from './graphview';
import { GraphNode, PanelModel } from './model';
import { Task } from './protocol';
import { MetricsView } from './metricsview';
import { RunsView } from './runsview';
import {
  el,
  formatBytes,
  formatSeconds,
  ObjectsView,
  setData,
  setText,
  totalsText,
  WaitsView,
  WorkersView
} from './views';

/** What a board needs from where it lives. */
export interface BoardHost {
  /** The link to the kernel: its status, and why it failed. */
  status(): LinkStatus;
  detail(): string;
  refresh(): void;
  step(command: StepCommand): Promise<StepReply>;
  /** A running task's stack, or why a wait waits (the kernel's text). */
  debug(what: DebugQuery, target: string): Promise<DebugReply>;
  /** How a cell is named ("in cell [5]"), whether it can be shown, and showing it. */
  cellLabel(tag: string | null): string;
  hasCell(tag: string | null): boolean;
  revealCell(tag: string | null): void;
}

const STACK_REFRESH_MS = 2000;
const WHY_AFTER_S = 2;
const WHY_REFRESH_MS = 3000;
const TICK_MS = 500;

function time(t: number | null): string {
  return t === null ? '–' : new Date(t * 1000).toLocaleTimeString();
}

export class Board {
  private readonly graph: GraphView;
  private readonly objects: ObjectsView;
  private readonly waits: WaitsView;
  private readonly workers: WorkersView;
  private readonly runs: RunsView;
  private readonly metrics: MetricsView;
  private readonly status = el('span', 'nbdist-status');
  private readonly totals = el('span', 'nbdist-totals');
  private readonly message = el('div', 'nbdist-message');
  private readonly details = el('section', 'nbdist-details');
  private readonly stepBar = el('span', 'nbdist-step-bar');
  private readonly stepToggle = el('button', 'nbdist-button nbdist-step-toggle', 'Step mode');
  private readonly stepButtons: HTMLButtonElement[] = [];
  private readonly stepCount = el('span', 'nbdist-step-count');
  private stepError = '';
  private selected: GraphNode | undefined;
  private frame = 0;
  private runsSeen = -1;
  private readonly knownRuns = new Set<string>();
  private detailsRevision = -1;
  private disposed = false;
  /** The selected running task's stack as last answered, and the element showing it. */
  private stack: { id: string; text: string } | null = null;
  private stackPre: HTMLElement | null = null;
  private stackAsked = 0;
  private stackAsking = false;
  private whyAsked = 0;
  private whyAsking = false;
  private readonly ticker: number;
  /** Shown after the status ("live · notebook.ipynb"). */
  where = '';

  /** Build the views into `node` (the panel's or the widget's root element). */
  constructor(
    readonly model: PanelModel,
    private readonly host: BoardHost,
    readonly node: HTMLElement
  ) {
    this.graph = new GraphView(this.model, {
      select: node => {
        this.selected = node;
        this.detailsRevision = -1;
        this.schedule();
      },
      describe: node => this.describe(node)
    });
    this.graph.changed = () => this.schedule();
    this.objects = new ObjectsView(this.model, id => this.taskName(id));
    this.waits = new WaitsView(this.model, tag => this.host.cellLabel(tag));
    this.workers = new WorkersView(this.model);
    this.runs = new RunsView(this.model);
    this.metrics = new MetricsView(this.model);

    const header = el('header', 'nbdist-header');
    const refresh = el('button', 'nbdist-button', 'Refresh');
    refresh.title = 'Ask the kernel for a fresh snapshot (or connect again)';
    refresh.addEventListener('click', () => this.host.refresh());
    header.append(this.status, this.totals, this.stepControls(), refresh);
    this.details.setAttribute('aria-label', 'Selected task');
    const side = el('div', 'nbdist-side');
    side.append(this.details, this.waits.node);
    const grid = el('div', 'nbdist-grid');
    grid.append(this.graph.node, this.runs.node, side, this.objects.node, this.workers.node);
    grid.append(this.metrics.node);
    this.node.append(header, this.message, grid);
    this.renderDetails();
    this.ticker = window.setInterval(() => this.tick(), TICK_MS);
  }

  /** Ask the kernel what the selected running task is doing and why long waits wait. */
  private tick(): void {
    if (this.disposed || this.host.status() !== 'connected') {
      return;
    }
    const now = Date.now();
    const task = this.selectedRunning();
    if (task && !this.stackAsking && now - this.stackAsked >= STACK_REFRESH_MS) {
      this.askStack(task.id);
    }
    if (!this.whyAsking && now - this.whyAsked >= WHY_REFRESH_MS) {
      const waits = this.waits.longWaits(now / 1000, WHY_AFTER_S).slice(0, 3);
      if (waits.length) {
        this.whyAsking = true;
        this.whyAsked = now;
        void Promise.all(
          waits.map(async wait => {
            const reply = await this.host.debug('why', wait.id);
            if (reply.status === 'ok' && reply.text) {
              this.waits.setWhy(wait.id, reply.text);
            }
          })
        ).finally(() => {
          this.whyAsking = false;
          this.schedule();
        });
      }
    }
  }

  private selectedRunning(): Task | undefined {
    const task = this.selected ? this.model.tasks.get(this.selected.id) : undefined;
    return task && task.state === 'running' ? task : undefined;
  }

  private askStack(id: string): void {
    this.stackAsking = true;
    this.stackAsked = Date.now();
    void this.host
      .debug('stack', id)
      .then(
        reply => {
          const text =
            reply.status === 'ok' ? (reply.text ?? '') : `No stack: ${reply.message ?? ''}`;
          this.stack = { id, text };
          if (this.stackPre && this.stackPre.dataset.taskId === id) {
            setText(this.stackPre, text);
            this.stackPre.dataset.asked = String(this.stackAsked);
          }
        },
        () => undefined
      )
      .finally(() => {
        this.stackAsking = false;
      });
  }

  /** Step-through mode: a toggle, Step (one task), Level (the ready set), Run, the count. */
  private stepControls(): HTMLElement {
    const bar = this.stepBar;
    bar.setAttribute('role', 'group');
    bar.setAttribute('aria-label', 'Step-through mode');
    const toggle = this.stepToggle;
    toggle.title = 'Hold each task before it runs, to release them step by step';
    toggle.setAttribute('aria-pressed', 'false');
    toggle.addEventListener('click', () => this.sendStep(this.model.step.on ? 'run' : 'on'));
    bar.appendChild(toggle);
    const buttons: [string, StepCommand, string][] = [
      ['Step', 'step', 'Release the task held longest'],
      ['Level', 'level', 'Release every held task: the ready set of the graph'],
      ['Run', 'run', 'Release everything held and leave step-through mode']
    ];
    for (const [text, command, title] of buttons) {
      const b = el('button', `nbdist-button nbdist-step-${command}`, text);
      b.title = title;
      b.addEventListener('click', () => this.sendStep(command));
      this.stepButtons.push(b);
      bar.appendChild(b);
    }
    bar.appendChild(this.stepCount);
    return bar;
  }

  private sendStep(command: StepCommand): void {
    void this.host.step(command).then(
      reply => {
        this.stepError = reply.status === 'error' ? reply.message ?? 'The step failed.' : '';
        this.schedule();
      },
      error => {
        this.stepError = `The step failed: ${error}`;
        this.schedule();
      }
    );
  }

  private renderStep(): void {
    const step = this.model.step;
    const connected = this.host.status() === 'connected';
    const toggle = this.stepToggle;
    setData(this.stepBar, 'on', String(step.on));
    setData(this.stepBar, 'held', String(step.held));
    if (toggle.getAttribute('aria-pressed') !== String(step.on)) {
      toggle.setAttribute('aria-pressed', String(step.on));
    }
    setText(toggle, step.on ? 'Step mode: on' : 'Step mode');
    toggle.disabled = !connected;
    for (const b of this.stepButtons) {
      b.disabled = !connected || !step.on;
    }
    setText(this.stepCount, step.on ? `${step.held} held` : '');
  }

  /** Called when the user shows or hides the libraries' calls in the graph. */
  set onShowInternal(fn: (on: boolean) => void) {
    this.graph.onShowInternal = fn;
  }

  /** Stop rendering (the host goes away). */
  dispose(): void {
    this.disposed = true;
    cancelAnimationFrame(this.frame);
    window.clearInterval(this.ticker);
  }

  /** Render in the next animation frame (once, however often it is asked). */
  schedule(): void {
    if (this.frame === 0 && !this.disposed) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.render();
      });
    }
  }

  private render(): void {
    this.renderHeader();
    this.graph.render();
    this.waits.render();
    this.objects.render();
    this.workers.render();
    this.runs.render();
    this.revealNewRun();
    this.metrics.render();
    if (this.detailsRevision !== this.model.revisions.graph) {
      this.renderDetails();
    }
    // Written only when a new kernel message is on screen: a benchmark observes the change.
    setData(this.node, 'renderedSeq', String(this.model.seq));
    setData(this.node, 'renderedTime', String(this.model.kernelTime));
  }

  /** A Tune or Train run that just started brings the Runs view into view (scrolled to in
   * the one-column layout of a narrow panel), as it is then what the running cell is about. */
  private revealNewRun(): void {
    const runs = this.model.runs;
    if (runs.revision === this.runsSeen) {
      return;
    }
    this.runsSeen = runs.revision;
    let fresh = false;
    for (const [id, run] of runs.runs) {
      if (!this.knownRuns.has(id)) {
        this.knownRuns.add(id);
        const live = [...run.members.values()].some(m =>
          ['PENDING', 'RUNNING', 'RESTARTING', 'PAUSED'].includes(m.row.status)
        );
        fresh = fresh || live;
      }
    }
    if (fresh && !this.runs.node.hidden) {
      this.runs.node.scrollIntoView({ block: 'start', behavior: 'auto' });
      setData(this.node, 'revealedRuns', String(this.knownRuns.size));
    }
  }

  private renderHeader(): void {
    const model = this.model;
    const status = this.host.status();
    const root = this.node;
    setData(root, 'linkStatus', status);
    setData(root, 'cluster', String(model.cluster));
    setData(root, 'grouped', String(model.grouped));
    const t = model.totals;
    const where = this.where ? ` · ${this.where}` : '';
    const states: Record<string, string> = {
      'no-notebook': 'no notebook',
      'no-kernel': 'no kernel',
      connecting: 'connecting…',
      connected: model.cluster ? 'live' : t.tasks ? 'cluster stopped' : 'no cluster yet',
      restarting: 'kernel restarting…',
      unsupported: 'not available',
      failed: 'disconnected'
    };
    setText(this.status, `${states[status]}${where}`);
    setText(
      this.totals,
      status === 'connected' ? totalsText(t) : ''
    );
    this.renderStep();
    let message = '';
    let kind = 'info';
    if (this.stepError) {
      message = this.stepError;
      kind = 'error';
    } else if (model.versionError) {
      message = model.versionError;
      kind = 'error';
    } else if (status === 'no-notebook') {
      message = "Open a notebook: the panel shows the cluster of the active notebook's kernel.";
    } else if (status === 'no-kernel') {
      message = 'This notebook has no kernel. Start one to see its cluster.';
    } else if (status === 'restarting') {
      message = 'The kernel is restarting; the panel reconnects when it is back.';
    } else if (status === 'unsupported' || status === 'failed') {
      message = this.host.detail();
      kind = 'error';
    } else if (status === 'connected' && !model.cluster) {
      message =
        t.tasks === 0
          ? 'No cluster yet: run nbdist.init() or a %%remote cell in this notebook.'
          : 'The cluster was shut down; what it did is still shown.';
      kind = t.tasks === 0 ? 'empty' : 'info';
    } else if (t.dropped_events > 0) {
      message =
        `The kernel skipped ${t.dropped_events} events while busy: ` +
        'some states may be stale.';
      kind = 'warning';
    }
    setText(this.message, message);
    if (this.message.hidden !== (message === '')) {
      this.message.hidden = message === '';
    }
    setData(this.message, 'kind', kind);
  }

  private taskName(taskId: string | null): string {
    if (taskId === null) {
      return '–';
    }
    return this.model.tasks.get(taskId)?.name ?? taskId;
  }

  private describe(node: GraphNode): string {
    if (node.kind === 'group') {
      const cell = this.host.cellLabel(node.submitter);
      return `${node.name} (${node.count} tasks ${cell})\n${summarize(node.counts)}`;
    }
    if (node.kind === 'object') {
      const obj = this.model.objects.get(node.name);
      return `put object ${node.name}${obj ? `\n${formatBytes(obj.size)} on ${obj.node}` : ''}`;
    }
    const task = this.model.tasks.get(node.id);
    if (!task) {
      return node.name;
    }
    const args = task.deps.length ? task.deps.join(', ') : 'none by reference';
    const lines = [`${task.name}: ${task.state}`, `args: ${args}`];
    if (task.worker !== null) {
      lines.push(`node ${task.node}, worker pid ${task.worker}`);
    }
    if (task.started !== null) {
      lines.push(`ran ${formatSeconds((task.ended ?? this.model.kernelTime) - task.started)}`);
    }
    if (task.error_type) {
      lines.push(`${task.error_type}: ${task.error}`);
    }
    return lines.join('\n');
  }

  private renderDetails(): void {
    this.detailsRevision = this.model.revisions.graph;
    const details = this.details;
    const node = this.selected ? this.model.graphNode(this.selected.id) : undefined;
    details.replaceChildren(el('h3', 'nbdist-heading', 'Details'));
    if (!node) {
      details.append(el('p', 'nbdist-note', 'Hover over or click a task in the graph.'));
      return;
    }
    const task = node.kind === 'task' ? this.model.tasks.get(node.id) : undefined;
    const table = el('dl', 'nbdist-fields');
    for (const [key, value] of this.fields(node, task)) {
      table.append(el('dt', '', key), el('dd', '', value));
    }
    details.appendChild(table);
    const tag = task ? task.submitter : node.submitter;
    if (this.host.hasCell(tag)) {
      const jump = el('button', 'nbdist-button nbdist-jump', 'Go to cell');
      jump.addEventListener('click', () => this.host.revealCell(tag));
      details.appendChild(jump);
    }
    const block = (title: string, className: string, text: string) =>
      details.append(el('h4', 'nbdist-subheading', title), el('pre', className, text));
    if (task?.error_type) {
      block('Error', 'nbdist-error', `${task.error_type}: ${task.error}`);
    }
    this.stackPre = null;
    if (task && task.state === 'running') {
      const known = this.stack?.id === task.id ? this.stack.text : null;
      block('Stack', 'nbdist-stack', known ?? 'Asking the kernel…');
      this.stackPre = details.lastElementChild as HTMLElement;
      this.stackPre.dataset.taskId = task.id;
      if (known === null && !this.stackAsking) {
        this.askStack(task.id);
      }
    }
    if (task?.stdout.length) {
      block('Output', 'nbdist-output', task.stdout.join('\n'));
    }
    if (node.kind === 'group') {
      const failed = [...this.model.tasks.values()].filter(
        t => t.group === node.id && t.state === 'failed'
      );
      if (failed.length) {
        block(
          'Recent failures',
          'nbdist-error',
          failed.map(t => `${t.id}: ${t.error_type}: ${t.error}`).join('\n')
        );
      }
    }
  }

  /** The key/value rows of the details pane. */
  private fields(node: GraphNode, task: Task | undefined): [string, string][] {
    if (task) {
      const ran =
        task.started !== null && task.ended !== null
          ? formatSeconds(task.ended - task.started)
          : '–';
      return [
        ['function', task.name],
        [
          'state',
          task.state +
            (task.attempt ? ` (retry ${task.attempt})` : '') +
            (task.paused ? ', paused in the debugger' : '')
        ],
        ...(task.paused
          ? [['paused at', `${task.paused} (%nbdist debug attaches)`] as [string, string]]
          : []),
        ['task id', task.id],
        ['arguments (refs)', task.deps.join(', ') || 'none'],
        ['returns', task.returns.join(', ')],
        ['node / worker', task.node ? `${task.node} / pid ${task.worker}` : 'not started'],
        ['submitted', time(task.submitted)],
        ['started', time(task.started)],
        ['ended', time(task.ended)],
        ['duration', ran],
        ['cell', this.host.cellLabel(task.submitter)],
        ...(task.actor ? [['actor', task.actor] as [string, string]] : [])
      ];
    }
    if (node.kind === 'group') {
      return [
        ['function', node.name],
        ['tasks', String(node.count)],
        ['states', summarize(node.counts)],
        ['cell', this.host.cellLabel(node.submitter)]
      ];
    }
    const obj = this.model.objects.get(node.name);
    return [
      ['put object', node.name],
      ...(obj
        ? ([
            ['size', formatBytes(obj.size)],
            ['node', obj.node],
            ['owner', obj.owner]
          ] as [string, string][])
        : [])
    ];
  }
}

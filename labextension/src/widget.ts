/**
 * The inline view: the panel's board (board.ts) as a widget of the anywidget contract, so
 * every notebook frontend with a widget manager (JupyterLab's cell output, Notebook 7, VS
 * Code, Colab) shows the same views as the JupyterLab panel, drawn by the same code.
 *
 * Built as an ES module of its own (`npm run build:widget`, widget.config.js) shipped in the
 * Python package; `nbdist.jupyter.widget.LiveWidget` is its kernel side. The comm protocol is
 * the panel's (docs/comm-protocol.md): the kernel sends the snapshot and the deltas as the
 * widget's custom messages; the widget asks for a snapshot with `{"type":
 * "request_snapshot"}` and sends step commands as `{"type": "step", "command": ...}`, answered
 * by `{"type": "step_reply", ...}`, and the details' stack and the waits' "why" as `{"type":
 * "debug", "what": "stack" | "why", "target": id}`, answered by `{"type": "debug_reply", ...}`. The traitlet `show_internal` is the "library calls"
 * toggle's state, set from the kernel (`nbdist.show(show_internal=True)`) or by the toggle.
 *
 * A view that has been on the page and is no longer stops folding messages and rendering:
 * JupyterLab draws a new view of the widget each time the kernel rewrites its output (after
 * every cell that changed the state, for the static form) and leaves the old view detached,
 * never removed, so every cell would otherwise add one more board doing a live view's work for
 * every message. Its state is dropped; should it come back on the page (a windowed notebook
 * detaches cells out of view and attaches them again), it asks for a snapshot and folds
 * messages again from it. (`WAKE_MS`: how often a dormant view looks whether it is back.)
 *
 * `renderSnapshot(el, snapshot)` draws a board from one saved snapshot with no kernel: the
 * static form the kernel embeds in the output's HTML for pages without a widget manager.
 */

import { Board, BoardHost } from './board';
import type { DebugQuery, DebugReply, LinkStatus, StepCommand, StepReply } from './connection';
import { PanelModel } from './model';
import { KernelMessage } from './protocol';

/** The part of anywidget's model a view uses. */
interface WidgetModel {
  get(name: string): unknown;
  set(name: string, value: unknown): void;
  save_changes(): void;
  send(content: unknown): void;
  on(event: string, callback: (...args: any[]) => void): void;
  off(event: string, callback: (...args: any[]) => void): void;
}

/** A root element for a board, sized for a cell's output. */
function root(el: HTMLElement, kind: string): HTMLElement {
  const node = document.createElement('div');
  node.className = `nbdist-panel nbdist-inline nbdist-${kind}`;
  el.appendChild(node);
  return node;
}

const WAKE_MS = 500;

function cellLabel(tag: string | null): string {
  return tag ? 'in a cell' : 'outside a cell';
}

function render({ model, el }: { model: WidgetModel; el: HTMLElement }): () => void {
  const panelModel = new PanelModel();
  let status: LinkStatus = 'connecting';
  const replies: ((reply: StepReply) => void)[] = [];
  const debugReplies: ((reply: DebugReply) => void)[] = [];
  const host: BoardHost = {
    status: () => status,
    detail: () => '',
    refresh: () => model.send({ type: 'request_snapshot' }),
    step: (command: StepCommand) =>
      new Promise<StepReply>(resolve => {
        replies.push(resolve);
        model.send({ type: 'step', command });
      }),
    debug: (what: DebugQuery, target: string) =>
      new Promise<DebugReply>(resolve => {
        debugReplies.push(resolve);
        model.send({ type: 'debug', what, target });
      }),
    cellLabel,
    hasCell: () => false,
    revealCell: () => undefined
  };
  const node = root(el, 'widget');
  const board = new Board(panelModel, host, node);
  panelModel.setShowInternal(model.get('show_internal') === true);
  // On the page once (a view is rendered before it is attached); off it since, with no state.
  let shown = false;
  let dormant = false;
  let asked = false;
  const onPage = (): boolean => {
    shown = shown || node.isConnected;
    return node.isConnected;
  };
  const wake = window.setInterval(() => {
    if (dormant && !asked && onPage()) {
      asked = true;
      model.send({ type: 'request_snapshot' });
    }
  }, WAKE_MS);
  const onMessage = (
    msg: KernelMessage | ({ type: 'step_reply' } & StepReply) | ({ type: 'debug_reply' } & DebugReply)
  ) => {
    if (msg.type === 'step_reply') {
      replies.shift()?.(msg as StepReply);
      return;
    }
    if (msg.type === 'debug_reply') {
      debugReplies.shift()?.(msg as DebugReply);
      return;
    }
    if (!onPage() && shown) {
      if (!dormant) {
        dormant = true;
        asked = false;
        panelModel.reset();
        panelModel.setShowInternal(model.get('show_internal') === true);
      }
      return;
    }
    if (dormant) {
      if (msg.type !== 'snapshot') {
        return; // deltas fold only onto the snapshot it asked for
      }
      dormant = false;
    }
    panelModel.apply(msg as KernelMessage);
    status = 'connected';
    board.schedule();
  };
  const onToggle = () => {
    panelModel.setShowInternal(model.get('show_internal') === true);
    board.schedule();
  };
  model.on('msg:custom', onMessage);
  model.on('change:show_internal', onToggle);
  // The toggle in the graph's toolbar writes back, so the kernel knows the view's choice.
  board.onShowInternal = on => {
    model.set('show_internal', on);
    model.save_changes();
  };
  model.send({ type: 'request_snapshot' });
  board.schedule();
  return () => {
    model.off('msg:custom', onMessage);
    model.off('change:show_internal', onToggle);
    window.clearInterval(wake);
    board.dispose();
  };
}

/** Draw a board from one snapshot, with no kernel behind it (a static page). */
export function renderSnapshot(el: HTMLElement, snapshot: KernelMessage, showInternal = false): Board {
  const panelModel = new PanelModel();
  panelModel.setShowInternal(showInternal);
  panelModel.apply(snapshot);
  const host: BoardHost = {
    status: () => 'connected',
    detail: () => '',
    refresh: () => undefined,
    step: () => Promise.resolve({ status: 'error', message: 'A saved snapshot: nothing runs.' }),
    debug: () => Promise.resolve({ status: 'error', message: 'A saved snapshot: nothing runs.' }),
    cellLabel,
    hasCell: () => false,
    revealCell: () => undefined
  };
  const board = new Board(panelModel, host, root(el, 'snapshot'));
  board.where = 'snapshot';
  board.schedule();
  return board;
}

export default { render };

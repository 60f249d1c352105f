/**
 * Which notebook cell sent which execute request, for every open notebook.
 *
 * nbdist tags tasks and waits with the execute request's msg_id (their `submitter`).
 * JupyterLab puts the cell's id in the request's metadata, so watching the requests each
 * notebook's kernel sends maps a tag back to a cell: the panel can jump to it. The kernel's
 * `execute_input` for that request carries its execution count, the `[5]` the user sees beside
 * the cell for that run: the panel names the cell by it (its position would count markdown
 * cells, and move as cells are added). Tags of requests sent before the page loaded are
 * unknown (shown as such).
 */

import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

interface CellRef {
  panel: NotebookPanel;
  cellId: string;
  /** The execution count of the run the request started (null until the kernel says). */
  count: number | null;
}

/** How a cell is named: by its execution count, as its prompt shows it. */
export function cellLabel(count: number | null | undefined): string {
  return `in cell [${count === null || count === undefined ? '*' : count}]`;
}

const MAX_TAGS = 5000;

export class CellIndex {
  private readonly tags = new Map<string, CellRef>();
  private readonly watched = new WeakSet<Kernel.IKernelConnection>();

  constructor(tracker: INotebookTracker) {
    tracker.forEach(panel => this.watch(panel));
    tracker.widgetAdded.connect((_, panel) => this.watch(panel));
  }

  private watch(panel: NotebookPanel): void {
    const attach = () => {
      const kernel = panel.sessionContext.session?.kernel;
      if (!kernel || this.watched.has(kernel)) {
        return;
      }
      this.watched.add(kernel);
      kernel.anyMessage.connect((_, args) => this.onMessage(panel, args));
    };
    panel.sessionContext.kernelChanged.connect(attach);
    void panel.sessionContext.ready.then(attach);
    attach();
  }

  private onMessage(panel: NotebookPanel, args: Kernel.IAnyMessageArgs): void {
    const msg = args.msg;
    const type = msg.header.msg_type;
    if (args.direction === 'recv' && (type === 'execute_input' || type === 'execute_reply')) {
      const ref = this.tags.get((msg.parent_header as { msg_id?: string }).msg_id ?? '');
      const count = (msg.content as { execution_count?: unknown }).execution_count;
      if (ref && ref.count === null && typeof count === 'number') {
        ref.count = count;
      }
      return;
    }
    if (args.direction !== 'send' || type !== 'execute_request') {
      return;
    }
    const cellId = (msg as KernelMessage.IExecuteRequestMsg).metadata?.cellId;
    if (typeof cellId === 'string') {
      this.tags.set(msg.header.msg_id, { panel, cellId, count: null });
      if (this.tags.size > MAX_TAGS) {
        this.tags.delete(this.tags.keys().next().value as string);
      }
    }
  }

  /** "in cell [5]" (the execution count of the run that sent it), or a plain description
   * when unknown. */
  label(tag: string | null): string {
    if (!tag) {
      return 'outside a cell';
    }
    const ref = this.tags.get(tag);
    return ref && (ref.count !== null || this.find(tag)) ? cellLabel(ref.count) : 'in an earlier cell';
  }

  /** Whether the cell of a tag is known and still exists. */
  has(tag: string | null): boolean {
    return !!tag && this.find(tag) !== undefined;
  }

  /** Activate the notebook and cell that sent a tagged request; false if it is gone. */
  reveal(tag: string | null, activate: (panel: NotebookPanel) => void): boolean {
    const found = tag ? this.find(tag) : undefined;
    if (!found) {
      return false;
    }
    const { panel, index } = found;
    activate(panel);
    const notebook = panel.content;
    notebook.activeCellIndex = index;
    void notebook.scrollToItem(index);
    return true;
  }

  private find(tag: string): { panel: NotebookPanel; index: number } | undefined {
    const ref = this.tags.get(tag);
    if (!ref || ref.panel.isDisposed) {
      return undefined;
    }
    const cells = ref.panel.content.widgets;
    const index = cells.findIndex(cell => cell.model.id === ref.cellId);
    return index < 0 ? undefined : { panel: ref.panel, index };
  }
}

/**
 * The nbdist panel of JupyterLab: a Lumino widget holding a Board (board.ts, every view),
 * fed by the kernel link (connection.ts) of the active notebook's kernel; cells are named and
 * found through the notebooks' CellIndex. The panel owns the model, the link and the board,
 * and their lifecycle.
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { Board } from './board';
import { CellIndex } from './cells';
import { KernelLink } from './connection';
import { PanelModel } from './model';

export const PANEL_ID = 'nbdist-panel';

export class NbdistPanel extends Widget {
  readonly model = new PanelModel();
  private readonly link: KernelLink;
  private readonly board: Board;

  constructor(cells: CellIndex, showNotebook: (panel: NotebookPanel) => void) {
    super();
    this.id = PANEL_ID;
    this.addClass('nbdist-panel');
    this.title.label = 'nbdist';
    this.title.caption = 'nbdist: task graph, object store, waits and workers';
    this.title.closable = true;
    this.link = new KernelLink(this.model, () => this.board.schedule());
    const link = this.link;
    this.board = new Board(
      this.model,
      {
        status: () => link.status,
        detail: () => link.detail,
        refresh: () => link.refresh(),
        step: command => link.step(command),
        debug: (what, target) => link.debug(what, target),
        cellLabel: tag => cells.label(tag),
        hasCell: tag => cells.has(tag),
        revealCell: tag => {
          cells.reveal(tag, showNotebook);
        }
      },
      this.node
    );
  }

  /** Show the cluster of this notebook's kernel (or nothing when null). */
  follow(context: ISessionContext | null, name: string): void {
    this.board.where = name;
    this.link.bind(context);
    this.board.schedule();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.board.dispose();
    this.link.dispose();
    super.dispose();
  }

  protected onAfterShow(): void {
    this.board.schedule();
  }

  protected onResize(): void {
    this.board.schedule();
  }
}

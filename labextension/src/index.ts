/**
 * The JupyterLab plugin: the command `nbdist:open-panel` (palette, launcher) and the one
 * panel it opens, which follows whichever notebook is active.
 */

import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';

import { CellIndex } from './cells';
import { NbdistPanel } from './panel';

export const COMMAND = 'nbdist:open-panel';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">' +
  '<g class="jp-icon3" fill="#616161">' +
  '<circle cx="3" cy="8" r="2"/><circle cx="12" cy="3" r="2"/><circle cx="12" cy="13" r="2"/>' +
  '<path d="M4.6 7.1 10.4 3.9l.5.9-5.8 3.2zM4.6 8.9l5.8 3.2-.5.9-5.8-3.2z"/></g></svg>';

export const nbdistIcon = new LabIcon({ name: 'nbdist:graph', svgstr: ICON_SVG });

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nbdist-panel:plugin',
  description: "nbdist's live task graph, object store, waits and workers for the active notebook.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILauncher, ILabShell],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    labShell: ILabShell | null
  ) => {
    const cells = new CellIndex(tracker);
    let panel: NbdistPanel | null = null;

    const follow = (notebook: NotebookPanel | null) => {
      if (panel && notebook) {
        panel.follow(notebook.sessionContext, notebook.title.label);
      }
    };
    tracker.currentChanged.connect((_, notebook) => follow(notebook));

    app.commands.addCommand(COMMAND, {
      label: 'Open nbdist Panel',
      caption: 'Show the task graph, object store, waits and workers of the notebook’s cluster',
      icon: nbdistIcon,
      execute: () => {
        if (!panel || panel.isDisposed) {
          panel = new NbdistPanel(cells, notebook => app.shell.activateById(notebook.id));
          panel.title.icon = nbdistIcon;
          const notebook = tracker.currentWidget;
          app.shell.add(panel, 'main', notebook ? { ref: notebook.id, mode: 'split-right' } : {});
          if (notebook) {
            follow(notebook);
          } else {
            panel.follow(null, '');
          }
        }
        if (labShell) {
          labShell.activateById(panel.id);
        } else {
          app.shell.activateById(panel.id);
        }
      }
    });
    palette?.addItem({ command: COMMAND, category: 'nbdist' });
    launcher?.add({ command: COMMAND, category: 'Other', rank: 1 });
  }
};

export default plugin;

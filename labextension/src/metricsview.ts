/**
 * The Metrics view: the application metrics that tasks, actors and the driver record with
 * nbdist.util.metrics (one row per metric and set of tag values: kind, tags, current value;
 * a histogram's count, mean and buckets), and the cluster's placement groups (name, strategy,
 * state, bundles). The kernel reads both about twice a second while the panel is open.
 *
 * Renders only when they changed; each table is hidden while empty, the section while both
 * are, so a notebook that records no metrics sees the panel as before.
 */

import { AppState, bucketsText, bundlesText, tagsText, valueText } from './appmetrics';
import { PanelModel } from './model';
import { AppMetric, PlacementGroup } from './protocol';
import { el, setData } from './views';

function table(caption: string, columns: string[]): [HTMLTableElement, HTMLElement] {
  const t = el('table', 'nbdist-table nbdist-metrics-table');
  t.createCaption().textContent = caption;
  const head = el('tr', '');
  head.append(...columns.map(c => el('th', '', c)));
  t.createTHead().appendChild(head);
  const body = el('tbody', '');
  t.appendChild(body);
  return [t, body];
}

function metricRow(m: AppMetric): HTMLElement {
  const tr = el('tr', 'nbdist-metric');
  tr.dataset.metric = m.name;
  tr.dataset.kind = m.kind;
  tr.dataset.tags = tagsText(m.tags);
  const name = el('td', 'nbdist-metric-name', m.name);
  name.title = m.description;
  const value = el('td', 'nbdist-metric-value', valueText(m));
  const buckets = bucketsText(m);
  if (buckets) {
    value.append(el('div', 'nbdist-metric-buckets', buckets));
  }
  tr.append(name, el('td', '', m.kind), el('td', 'nbdist-metric-tags', tagsText(m.tags)), value);
  return tr;
}

function groupRow(pg: PlacementGroup): HTMLElement {
  const tr = el('tr', 'nbdist-placement-group');
  tr.dataset.group = pg.id;
  tr.dataset.state = pg.state;
  const name = el('td', '', pg.name || pg.id.slice(0, 8));
  name.title = pg.id;
  tr.append(name, el('td', '', pg.strategy), el('td', '', pg.state),
            el('td', '', bundlesText(pg)));
  return tr;
}

export class MetricsView {
  readonly node = el('section', 'nbdist-metrics');
  private readonly metricsTable: HTMLTableElement;
  private readonly metricsBody: HTMLElement;
  private readonly groupsTable: HTMLTableElement;
  private readonly groupsBody: HTMLElement;
  private state: AppState | null = null;
  private revision = -1;

  constructor(private readonly model: PanelModel) {
    this.node.setAttribute('aria-label', 'Metrics');
    [this.metricsTable, this.metricsBody] = table('Application metrics', [
      'metric', 'kind', 'tags', 'value'
    ]);
    [this.groupsTable, this.groupsBody] = table('Placement groups', [
      'name', 'strategy', 'state', 'bundles'
    ]);
    this.node.append(el('h3', 'nbdist-heading', 'Metrics'), this.metricsTable, this.groupsTable);
    this.node.hidden = true;
  }

  render(): void {
    const state = this.model.app;
    if (state === this.state && state.revision === this.revision) {
      return;
    }
    this.state = state;
    this.revision = state.revision;
    const { metrics, placementGroups } = state;
    this.node.hidden = metrics.length === 0 && placementGroups.length === 0;
    this.metricsTable.hidden = metrics.length === 0;
    this.groupsTable.hidden = placementGroups.length === 0;
    setData(this.node, 'metrics', String(metrics.length));
    setData(this.node, 'placementGroups', String(placementGroups.length));
    this.metricsBody.replaceChildren(...metrics.map(metricRow));
    this.groupsBody.replaceChildren(...placementGroups.map(groupRow));
  }
}

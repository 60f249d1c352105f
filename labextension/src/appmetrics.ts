/**
 * The application metrics (nbdist.util.metrics) and placement groups as the panel keeps them:
 * pure, no DOM. The kernel sends both lists whole: a snapshot sets them (absent: none), a delta
 * replaces the ones it carries, which it does only when they changed.
 */

import { AppMetric, Delta, PlacementGroup, Snapshot } from './protocol';

export class AppState {
  metrics: AppMetric[] = [];
  placementGroups: PlacementGroup[] = [];
  revision = 0;

  apply(msg: Snapshot | Delta): void {
    if (msg.type === 'snapshot') {
      this.metrics = msg.metrics ?? [];
      this.placementGroups = msg.placement_groups ?? [];
    } else if (msg.metrics !== undefined || msg.placement_groups !== undefined) {
      this.metrics = msg.metrics ?? this.metrics;
      this.placementGroups = msg.placement_groups ?? this.placementGroups;
    } else {
      return;
    }
    this.revision++;
  }
}

/** Counters are usually whole numbers: shown in full, not rounded to 4 digits. */
export function formatNumber(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) {
    return '–';
  }
  if (Number.isInteger(v) && Math.abs(v) < 1e15) {
    return String(v);
  }
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : String(+v.toPrecision(4));
}

/** "route=/a, status=200", or "–" for a metric without tags. */
export function tagsText(tags: Record<string, string>): string {
  const parts = Object.keys(tags)
    .sort()
    .map(k => `${k}=${tags[k]}`);
  return parts.length ? parts.join(', ') : '–';
}

/** A counter's or gauge's value; a histogram's count and mean. */
export function valueText(m: AppMetric): string {
  if (m.kind !== 'histogram') {
    return formatNumber(m.value);
  }
  const count = m.count ?? 0;
  return count ? `${count} values, mean ${formatNumber((m.sum ?? 0) / count)}` : '0 values';
}

/** A histogram's buckets: "≤0.1: 3 · ≤1: 5 · >1: 0" (empty for other kinds). */
export function bucketsText(m: AppMetric): string {
  if (m.kind !== 'histogram' || !m.boundaries || !m.buckets) {
    return '';
  }
  const bounds = m.boundaries;
  return m.buckets
    .map((n, i) =>
      i < bounds.length
        ? `≤${formatNumber(bounds[i])}: ${n}`
        : `>${formatNumber(bounds[bounds.length - 1])}: ${n}`
    )
    .join(' · ');
}

/** "{CPU: 1} {CPU: 1, GPU: 1}": the resources of each bundle. */
export function bundlesText(pg: PlacementGroup): string {
  return pg.bundles
    .map(
      b =>
        `{${Object.keys(b)
          .sort()
          .map(r => `${r}: ${formatNumber(b[r])}`)
          .join(', ')}}`
    )
    .join(' ');
}

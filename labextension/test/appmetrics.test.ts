import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { AppState, bucketsText, bundlesText, tagsText, valueText } from '../src/appmetrics';
import { AppMetric, Delta, Snapshot } from '../src/protocol';

const counter: AppMetric = {
  name: 'requests', kind: 'counter', description: '', tags: { route: '/a', code: '200' }, value: 12345
};
const histogram: AppMetric = {
  name: 'latency_s', kind: 'histogram', description: '', tags: {},
  count: 4, sum: 1.0, boundaries: [0.1, 1], buckets: [1, 3, 0]
};

function message(type: 'snapshot' | 'delta', extra: Partial<Snapshot>): Snapshot | Delta {
  return { type, ...extra } as Snapshot | Delta;
}

test('a snapshot sets both lists; a delta replaces only what it carries', () => {
  const state = new AppState();
  state.apply(message('snapshot', { metrics: [counter] }));
  assert.deepEqual(state.metrics, [counter]);
  assert.deepEqual(state.placementGroups, []);
  const seen = state.revision;
  state.apply(message('delta', {}));
  assert.equal(state.revision, seen, 'a delta without them changes nothing');
  state.apply(message('delta', { metrics: [histogram], placement_groups: [] }));
  assert.deepEqual(state.metrics, [histogram]);
  assert.ok(state.revision > seen);
  state.apply(message('snapshot', {}));
  assert.deepEqual(state.metrics, []);
});

test('values, tags, buckets and bundles read as the view shows them', () => {
  assert.equal(valueText(counter), '12345');
  assert.equal(tagsText(counter.tags), 'code=200, route=/a');
  assert.equal(tagsText({}), '–');
  assert.equal(valueText(histogram), '4 values, mean 0.25');
  assert.equal(bucketsText(histogram), '≤0.1: 1 · ≤1: 3 · >1: 0');
  assert.equal(bucketsText(counter), '');
  assert.equal(
    bundlesText({ id: 'x', name: '', strategy: 'PACK', state: 'CREATED',
                  bundles: [{ CPU: 1 }, { GPU: 1, CPU: 2 }] }),
    '{CPU: 1} {CPU: 2, GPU: 1}'
  );
});

import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { Run, RunMember } from '../src/protocol';
import { MAX_POINTS, RunsState } from '../src/runs';
import { curveOf } from '../src/runsview';

function member(id: string, reports: number, points: [number, number, number][],
                marks: [number, number, string, string][] = []): RunMember {
  return {
    id, status: 'RUNNING', iteration: reports, config: { lr: '0.1' },
    metrics: { loss: points.length ? points[points.length - 1][2] : 0 }, note: '', reports,
    curves: { loss: points }, marks, updated: reports
  };
}

function run(members: RunMember[], updated = 1): Run {
  return {
    id: 'tune:s', library: 'tune', name: 's', metrics: ['loss'], updated,
    members: Object.fromEntries(members.map(m => [m.id, m]))
  };
}

test('a delta appends only the news, and applying it twice changes nothing', () => {
  const state = new RunsState();
  state.applySnapshot({ 'tune:s': run([member('t1', 2, [[1, 1, 1.0], [2, 2, 0.5]])]) });
  const news = { 'tune:s': run([member('t1', 3, [[3, 3, 0.25]], [[3, 3, 'stopped', 'stopped by ASHA']])], 2) };
  state.applyDelta(news, undefined);
  state.applyDelta(news, undefined);
  const t1 = state.runs.get('tune:s')!.members.get('t1')!;
  assert.deepEqual(t1.curves.get('loss')!.map(p => p[1]), [1, 2, 3]);
  assert.equal(t1.marks.length, 1);
  assert.equal(t1.row.reports, 3);
});

test('a curve held by the panel stays within its bound', () => {
  const state = new RunsState();
  state.applySnapshot({});
  for (let i = 1; i <= 5 * MAX_POINTS; i++) {
    state.applyDelta({ 'tune:s': run([member('t1', i, [[i, i, 1 / i]])], i) }, undefined);
  }
  const points = state.runs.get('tune:s')!.members.get('t1')!.curves.get('loss')!;
  assert.ok(points.length <= MAX_POINTS, `${points.length}`);
  assert.equal(points[0][1], 1);
});

test('runs the kernel removed go', () => {
  const state = new RunsState();
  state.applySnapshot({ 'tune:s': run([member('t1', 1, [[1, 1, 1]])]) });
  state.applyDelta(undefined, ['tune:s']);
  assert.equal(state.runs.size, 0);
});

test('a curve ends at the latest report even when thinning dropped it', () => {
  const state = new RunsState();
  const row = member('t1', 5, [[1, 1, 1.0], [3, 3, 0.5]]);
  row.metrics = { loss: 0.2 };
  state.applySnapshot({ 'tune:s': run([row]) });
  const t1 = state.runs.get('tune:s')!.members.get('t1')!;
  assert.deepEqual(curveOf(t1, 'loss').map(p => [p[1], p[2]]), [[1, 1.0], [3, 0.5], [5, 0.2]]);
});

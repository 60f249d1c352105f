import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { PanelModel } from '../src/model';
import { Delta, SCHEMA_VERSION, Snapshot, Task } from '../src/protocol';

function task(id: string, held: boolean): Task {
  return {
    id, name: 'add', state: 'scheduled', deps: [], dep_tasks: [], returns: [`${id}.r`],
    parent: null, actor: null, submitter: 'cell-1', group: 'g1', node: null, worker: null,
    submitted: 1, started: null, ended: null, error_type: null, error: null, attempt: 0,
    stdout: [], held
  };
}

function snapshot(fields: Partial<Snapshot> = {}): Snapshot {
  return {
    schema: SCHEMA_VERSION, type: 'snapshot', seq: 0, time: 1, grouped: false,
    cluster: true, tasks: {}, groups: {}, group_edges: [], objects: {}, waits: {}, workers: {},
    nodes: {}, actors: {},
    totals: { tasks: 0, pending: 0, scheduled: 0, running: 0, finished: 0, failed: 0, objects: 0,
              objects_freed: 0, bytes: 0, output_lines: 0, dropped_events: 0 },
    ...fields
  };
}

function delta(seq: number, fields: Partial<Delta>): Delta {
  return { ...snapshot(), type: 'delta', seq, tasks_removed: [], objects_removed: [],
           waits_removed: [], ...fields } as Delta;
}

test('held tasks are marked in the graph and the step status follows the kernel', () => {
  const model = new PanelModel();
  model.apply(snapshot({ tasks: { a: task('a', true), b: task('b', false) },
                         step: { on: true, held: 1 } }));
  assert.deepEqual(model.step, { on: true, held: 1 });
  const held = Object.fromEntries(model.graphNodes().map(n => [n.id, n.held]));
  assert.deepEqual(held, { a: true, b: false });

  // A delta without `step` leaves it as it was; one with it replaces it.
  model.apply(delta(1, { tasks: { a: task('a', false) } }));
  assert.deepEqual(model.step, { on: true, held: 1 });
  assert.equal(model.graphNodes().find(n => n.id === 'a')?.held, false);
  model.apply(delta(2, { step: { on: false, held: 0 } }));
  assert.deepEqual(model.step, { on: false, held: 0 });
});

test('a snapshot without step status means the mode is off', () => {
  const model = new PanelModel();
  model.apply(snapshot({ step: { on: true, held: 3 } }));
  model.apply(snapshot());
  assert.deepEqual(model.step, { on: false, held: 0 });
});

import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { Actor, Totals, Wait, Worker } from '../src/protocol';
import { totalsText, waitFill, waitText, workersCaption } from '../src/views';

function totals(fields: Partial<Totals>): Totals {
  return {
    tasks: 0, pending: 0, scheduled: 0, running: 0, finished: 0, failed: 0, objects: 0,
    objects_freed: 0, bytes: 0, output_lines: 0, dropped_events: 0, ...fields
  };
}

function worker(id: string, state: Worker['state'], taskName: string | null): Worker {
  return { id, node: 'n1', pid: Number(id), state, task: null, task_name: taskName,
           tasks_done: 0, busy_s: 0, spans: [] };
}

test('the header counts every state, so its parts add up to the total', () => {
  const text = totalsText(totals({ tasks: 20000, pending: 3710, scheduled: 6936, running: 1,
                                   finished: 9353 }));
  const parts = [...text.matchAll(/(\d+) (pending|scheduled|running|finished|failed)/g)];
  assert.deepEqual(parts.map(p => p[2]), ['pending', 'scheduled', 'running', 'finished',
                                          'failed']);
  assert.equal(parts.reduce((sum, p) => sum + Number(p[1]), 0), 20000);
  assert.match(text, /^20000 tasks: /);
});

test('a worker is busy only while up and running a task; dead actors are not alive', () => {
  const workers = [worker('1', 'up', 'f'), worker('2', 'up', null), worker('3', 'down', 'f')];
  const actors: Actor[] = [
    { id: 'a1', class_name: 'C', name: null, state: 'dead', restarts: 0,
      reason: 'the cluster stopped' },
    { id: 'a2', class_name: 'C', name: null, state: 'alive', restarts: 0, reason: null }
  ];
  assert.equal(workersCaption(workers, actors),
               '3 workers, 1 busy now · 1 actors alive, 1 dead');
});

test("a wait's row names its numbers and a wait that returned as asked reads finished", () => {
  const wait = (ready: number, done: boolean, timedOut = false): Wait => ({
    id: 'w1', call: 'wait', num_returns: 1, total: 2, ready, submitter: null, started: 10,
    ended: done ? 11.61 : null, done, timed_out: timedOut });
  assert.equal(waitText(wait(1, true)), '1 of 2 ready, asked for 1: done in 1.61 s');
  assert.equal(waitFill(wait(1, true)), 1);
  assert.equal(waitText(wait(0, false)), '0 of 2 ready, asked for 1: waiting');
  assert.equal(waitFill(wait(0, false)), 0);
  assert.match(waitText(wait(0, true, true)), /^0 of 2 ready, asked for 1: timed out after /);
  assert.equal(waitFill(wait(1, true, true)), 0.5);
});

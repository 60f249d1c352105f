import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { groupState, MAX_SPANS, PanelModel } from '../src/model';
import { Delta, Group, SCHEMA_VERSION, Snapshot, Task, TaskState, Worker } from '../src/protocol';

let clock = 1000;

function task(id: string, name: string, state: TaskState, deps: string[] = [],
              depTasks: string[] = [], group = 'g1'): Task {
  clock += 0.001;
  return {
    id, name, state, deps, dep_tasks: depTasks, returns: [`${id}.r`], parent: null, actor: null,
    submitter: 'cell-1', group, node: 'n1', worker: 11, submitted: clock, started: null,
    ended: null, error_type: null, error: null, attempt: 0, stdout: []
  };
}

function group(id: string, name: string, counts: Partial<Record<TaskState, number>>): Group {
  const total = Object.values(counts).reduce((a, b) => a + (b ?? 0), 0);
  return { id, name, submitter: 'cell-1', counts, total };
}

function worker(id: string, spans: Worker['spans']): Worker {
  return { id, node: 'n1', pid: 11, state: 'up', task: null, task_name: null,
           tasks_done: spans.length, busy_s: 0, spans };
}

function snapshot(fields: Partial<Snapshot> = {}): Snapshot {
  return {
    schema: SCHEMA_VERSION, type: 'snapshot', seq: 0, time: clock, grouped: false,
    cluster: true, tasks: {}, groups: {}, group_edges: [], objects: {}, waits: {}, workers: {},
    nodes: {}, actors: {},
    totals: { tasks: 0, pending: 0, scheduled: 0, running: 0, finished: 0, failed: 0, objects: 0,
              objects_freed: 0, bytes: 0, output_lines: 0, dropped_events: 0 },
    ...fields
  };
}

function delta(seq: number, fields: Partial<Delta> = {}): Delta {
  return { ...snapshot(), type: 'delta', seq, tasks_removed: [], objects_removed: [],
           waits_removed: [], ...fields } as Delta;
}

function byId<T extends { id: string }>(items: T[]): Record<string, T> {
  return Object.fromEntries(items.map(item => [item.id, item]));
}

function states(model: PanelModel): Record<string, string> {
  return Object.fromEntries(model.graphNodes().map(n => [n.id, n.state]));
}

test('a snapshot replaces the state and deltas upsert full records', () => {
  const model = new PanelModel();
  const a = task('a', 'one', 'finished');
  const b = task('b', 'one', 'running');
  model.apply(snapshot({ tasks: byId([a, b]) }));
  assert.deepEqual(states(model), { a: 'finished', b: 'running' });

  const c = task('c', 'add', 'pending', ['a.r', 'b.r'], ['a', 'b'], 'g2');
  const update = delta(1, { tasks: byId([{ ...b, state: 'finished' }, c]) });
  model.apply(update);
  model.apply(update); // the same delta twice changes nothing more
  assert.deepEqual(states(model), { a: 'finished', b: 'finished', c: 'pending' });
  assert.deepEqual(model.graphEdges(), [['a', 'c', 1], ['b', 'c', 1]]);
  assert.equal(model.seq, 1);

  model.apply(delta(2, { tasks_removed: ['a'] }));
  assert.deepEqual(Object.keys(states(model)).sort(), ['b', 'c']);

  model.apply(snapshot({ seq: 3, tasks: byId([c]) }));
  assert.deepEqual(states(model), { c: 'pending' });
});

test('objects and waits are upserted and removed; waits list active ones first', () => {
  const model = new PanelModel();
  const obj = { id: 'o1', size: 8_000_000, node: 'n1', locations: ['n1'], owner: 'driver',
                task: null, in_shared_memory: true, state: 'live', created: clock };
  const wait = (id: string, done: boolean, started: number) => ({
    id, call: 'wait' as const, num_returns: 3, total: 4, ready: done ? 3 : 1,
    submitter: 'cell-1', done, timed_out: false, started, ended: done ? started + 1 : null
  });
  model.apply(snapshot({ objects: byId([obj]), waits: byId([wait('1', true, 5)]) }));
  const before = { ...model.revisions };
  model.apply(delta(1, { waits: byId([wait('2', false, 7), wait('3', false, 6)]) }));
  assert.deepEqual(model.sortedWaits().map(w => w.id), ['3', '2', '1']);
  assert.equal(model.revisions.objects, before.objects, 'objects untouched: no redraw');
  assert.ok(model.revisions.waits > before.waits);

  model.apply(delta(2, { objects_removed: ['o1'], waits_removed: ['1'] }));
  assert.equal(model.objects.size, 0);
  assert.deepEqual(model.sortedWaits().map(w => w.id), ['3', '2']);
});

test('a put object a task takes becomes a node before the task', () => {
  const model = new PanelModel();
  const t = task('t', 'add', 'finished', ['x', 'p.r'], ['p']);
  const p = task('p', 'one', 'finished');
  const x = { id: 'x', size: 6, node: 'n1', locations: ['n1'], owner: 'driver', task: null,
              in_shared_memory: false, state: 'live', created: clock };
  model.apply(snapshot({ tasks: byId([p, t]), objects: byId([x]) }));
  const nodes = Object.fromEntries(model.graphNodes().map(n => [n.id, n]));
  assert.equal(nodes['object:x'].kind, 'object');
  assert.equal(nodes['t'].col, 1);
  assert.deepEqual(model.graphEdges().sort(), [['object:x', 't', 1], ['p', 't', 1]]);
});

test('layout cells stay put as deltas add tasks', () => {
  const model = new PanelModel();
  model.apply(snapshot({ tasks: byId([task('a', 'f', 'pending'), task('b', 'f', 'pending')]) }));
  const cells = () => Object.fromEntries(model.graphNodes().map(n => [n.id, [n.col, n.row]]));
  const first = cells();
  for (let i = 0; i < 20; i++) {
    model.apply(delta(i + 1, { tasks: byId([task(`c${i}`, 'g', 'pending', ['a.r'], ['a'])]) }));
  }
  const later = cells();
  assert.deepEqual([later.a, later.b], [first.a, first.b]);
  assert.deepEqual(later.c0, [1, 0]);
  assert.deepEqual(later.c19, [1, 19]);
  assert.equal(model.nodeAt(1, 19)?.id, 'c19');
});

test('past the threshold the kernel groups: nodes carry counts and a dominant state', () => {
  const model = new PanelModel();
  model.apply(snapshot({ tasks: byId([task('a', 'f', 'finished')]) }));
  assert.equal(model.graphNodes()[0].kind, 'task');

  const failed = task('bad', 'g', 'failed', [], [], 'g2');
  model.apply(snapshot({
    seq: 5, grouped: true, tasks: byId([failed]),
    groups: byId([group('g1', 'f', { pending: 10, running: 2, finished: 2988 }),
                  group('g2', 'g', { finished: 1999, failed: 1 })]),
    group_edges: [['g1', 'g2', 2000], ['g2', 'g2', 3]]
  }));
  const nodes = model.graphNodes();
  assert.deepEqual(nodes.map(n => [n.id, n.kind, n.state, n.count]),
                   [['g1', 'group', 'running', 3000], ['g2', 'group', 'failed', 2000]]);
  assert.deepEqual([nodes[0].col, nodes[1].col], [0, 1]);
  assert.equal(model.tasks.get('bad')?.error, null, 'failed tasks stay inspectable');

  model.apply(delta(6, { grouped: true,
                         groups: byId([group('g1', 'f', { finished: 3000 })]),
                         group_edges: [['g1', 'g2', 2500]] }));
  const after = model.graphNodes();
  assert.deepEqual(after.map(n => [n.id, n.state, n.count, n.col, n.row]),
                   [['g1', 'finished', 3000, 0, 0], ['g2', 'failed', 2000, 1, 0]]);
  assert.deepEqual(model.graphEdges().find(e => e[0] === 'g1'), ['g1', 'g2', 2500]);
});

test('a group shows what runs now, else how it ended', () => {
  assert.equal(groupState({ pending: 1, running: 1, failed: 3 }), 'running');
  assert.equal(groupState({ scheduled: 2, pending: 1 }), 'scheduled');
  assert.equal(groupState({ pending: 1, finished: 4 }), 'pending');
  assert.equal(groupState({ finished: 4, failed: 1 }), 'failed');
  assert.equal(groupState({ finished: 4 }), 'finished');
});

test('another schema version is reported and its messages ignored', () => {
  const model = new PanelModel();
  model.apply({ ...snapshot({ tasks: byId([task('a', 'f', 'pending')]) }),
                schema: SCHEMA_VERSION + 1 });
  assert.match(model.versionError ?? '', /versions differ/);
  assert.equal(model.tasks.size, 0);
  model.apply({ schema: SCHEMA_VERSION, type: 'error', message: 'no such thing' });
  assert.equal(model.kernelError, 'no such thing');
});

test('worker spans accumulate across deltas, deduplicated and bounded', () => {
  const model = new PanelModel();
  const span = (i: number): Worker['spans'][number] => [`t${i}`, 'f', i, i + 0.5, i === 3];
  model.apply(snapshot({ workers: byId([worker('n1:11', [span(1), span(2)])]) }));
  model.apply(delta(1, { workers: byId([worker('n1:11', [span(2), span(3)])]) }));
  assert.deepEqual(model.workerSpans('n1:11').map(s => s[0]), ['t1', 't2', 't3']);
  for (let i = 4; i < MAX_SPANS + 50; i += 10) {
    const spans = Array.from({ length: 10 }, (_, k) => span(i + k));
    model.apply(delta(i, { workers: byId([worker('n1:11', spans)]) }));
  }
  const kept = model.workerSpans('n1:11');
  assert.equal(kept.length, MAX_SPANS);
  assert.equal(kept[kept.length - 1][0], `t${MAX_SPANS + 53}`);
});

test('reset forgets the old kernel but keeps revisions moving forward', () => {
  const model = new PanelModel();
  model.apply(snapshot({ tasks: byId([task('a', 'f', 'pending')]) }));
  const graph = model.revisions.graph;
  model.reset();
  assert.equal(model.tasks.size, 0);
  assert.equal(model.graphNodes().length, 0);
  assert.ok(model.revisions.graph > graph);
});

test("library calls are folded: a run's members stand for it, the plumbing shows on demand", () => {
  const model = new PanelModel();
  const mark = (member: string, role: string) => ({ library: 'tune', run: 'search', member, role });
  const create = { ...task('c1', 'TrialActor.__init__', 'finished'), actor: 'A1',
                   library_call: mark('', 'control') };
  const run1 = { ...task('r1', 'TrialActor.run', 'running'), actor: 'A1',
                 library_call: mark('t1', 'work') };
  const poll1 = { ...task('p1', 'TrialActor.poll', 'finished'), actor: 'A1',
                  library_call: mark('t1', 'control') };
  const mine = task('u1', 'preprocess', 'finished');
  const after = task('u2', 'summarize', 'pending', ['p1.r'], ['p1']);
  model.apply(snapshot({ tasks: byId([create, run1, poll1, mine, after]) }));

  const shown = model.graphNodes();
  assert.deepEqual(shown.map(n => n.name).sort(), ['preprocess', 'summarize', 'trial t1']);
  const trialNode = shown.find(n => n.id === 'r1')!;
  assert.deepEqual(model.lanes().map(l => l.key), ['member:tune:search:t1']);
  assert.equal(model.laneMember('member:tune:search:t1')?.member, 't1');
  assert.equal(model.nodeAt(trialNode.col, trialNode.row)?.id, 'r1');
  assert.deepEqual(model.graphEdges(), []); // the hidden poll's edge goes with it

  const before = model.revisions.graph;
  model.setShowInternal(true);
  assert.ok(model.revisions.graph > before);
  assert.deepEqual(model.graphNodes().map(n => n.id).sort(), ['c1', 'p1', 'r1', 'u1', 'u2']);
  // the trial's poll joins the trial's lane; the actor's creation stays in the actor's
  assert.deepEqual(model.lanes().map(l => [l.key, l.calls]),
                   [['A1', 1], ['member:tune:search:t1', 2]]);
  assert.deepEqual(model.graphEdges(), [['p1', 'u2', 1]]);
  model.setShowInternal(false);
  assert.equal(model.graphNodes().length, 3);

  // The trial's lane reads its run's row: status, iteration, last metric, news.
  model.runs.applySnapshot({
    'tune:search': {
      id: 'tune:search', library: 'tune', name: 'search', metrics: ['loss'], updated: 1,
      members: { t1: { id: 't1', status: 'TERMINATED', iteration: 4, config: {},
                       metrics: { loss: 0.123456 }, note: 'stopped by ASHAScheduler at iteration 4',
                       reports: 4, curves: {}, marks: [], updated: 1 } }
    }
  });
  model.graphNodes();
  assert.equal(model.memberNote('member:tune:search:t1'),
               'terminated · iter 4 · loss 0.1235 · stopped by ASHAScheduler at iteration 4');
});

test('grouped, the groups of library plumbing are hidden unless shown', () => {
  const model = new PanelModel();
  const polls = { ...group('g1', 'TrialActor.poll', { finished: 500 }),
                  library_call: { library: 'tune', run: 's', member: '', role: 'control' } };
  const work = group('g2', 'work', { running: 3 });
  model.apply(snapshot({ grouped: true, groups: byId([polls, work]),
                         group_edges: [['g1', 'g2', 4]] }));
  assert.deepEqual(model.graphNodes().map(n => n.id), ['g2']);
  assert.deepEqual(model.graphEdges(), []);
  model.setShowInternal(true);
  assert.deepEqual(model.graphNodes().map(n => n.id), ['g1', 'g2']);
  assert.deepEqual(model.graphEdges(), [['g1', 'g2', 4]]);
});

test("a library's waits are left out of the waits view unless its calls are shown", () => {
  const model = new PanelModel();
  const wait = (id: string, mark?: { library: string; run: string; member: string; role: string }) => ({
    id, call: 'wait' as const, num_returns: 1, total: 2, ready: 1, submitter: null, done: true,
    timed_out: false, started: 1, ended: 2, ...(mark ? { library_call: mark } : {}) });
  model.apply(snapshot({ waits: byId([wait('w1'), wait('w2', { library: 'tune', run: 's',
                                                                member: '', role: 'control' })]) }));
  assert.deepEqual(model.sortedWaits().map(w => w.id), ['w1']);
  model.setShowInternal(true);
  assert.deepEqual(model.sortedWaits().map(w => w.id).sort(), ['w1', 'w2']);
});

import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { LANE_CALLS, StableLayout } from '../src/layout';

test('a node goes one column right of its furthest placed predecessor', () => {
  const layout = new StableLayout();
  assert.deepEqual(layout.place('a', []), { col: 0, row: 0 });
  assert.deepEqual(layout.place('b', []), { col: 0, row: 1 });
  assert.deepEqual(layout.place('c', ['a']), { col: 1, row: 0 });
  assert.deepEqual(layout.place('d', ['b', 'c']), { col: 2, row: 0 });
  assert.deepEqual(layout.place('e', ['a', 'unknown']), { col: 1, row: 1 });
  assert.equal(layout.at(1, 1), 'e');
  assert.equal(layout.at(3, 0), undefined);
  assert.deepEqual([layout.columns, layout.rows, layout.size], [3, 2, 5]);
});

test('placed nodes never move as the graph grows', () => {
  const layout = new StableLayout();
  const first = new Map<string, string>();
  for (let i = 0; i < 50; i++) {
    const cell = layout.place(`t${i}`, i > 0 ? [`t${i - 1}`, `t${Math.floor(i / 2)}`] : []);
    first.set(`t${i}`, JSON.stringify(cell));
  }
  for (let i = 0; i < 50; i++) {
    // Placing again (e.g. with predecessors learnt later) returns the first cell.
    assert.equal(JSON.stringify(layout.place(`t${i}`, ['t49'])), first.get(`t${i}`));
    assert.equal(JSON.stringify(layout.get(`t${i}`)), first.get(`t${i}`));
  }
});

test('a chain keeps its row and a tree fans out: depth versus width', () => {
  const layout = new StableLayout();
  const chain = ['c0'];
  layout.place('c0', []);
  for (let i = 1; i < 7; i++) {
    layout.place(`c${i}`, [`c${i - 1}`]);
    chain.push(`c${i}`);
  }
  let level = ['l0', 'l1', 'l2', 'l3'];
  const tree = [...level];
  level.forEach(id => layout.place(id, []));
  for (let depth = 1; level.length > 1; depth++) {
    const next: string[] = [];
    for (let i = 0; i < level.length; i += 2) {
      const id = `t${depth}.${i}`;
      layout.place(id, [level[i], level[i + 1]]);
      next.push(id);
    }
    tree.push(...next);
    level = next;
  }
  const span = (ids: string[]) => {
    const cells = ids.map(id => layout.get(id)!);
    return [new Set(cells.map(c => c.col)).size, new Set(cells.map(c => c.row)).size];
  };
  assert.deepEqual(span(chain), [7, 1]);
  assert.deepEqual(span(tree), [3, 4]);
  // A parent sits in the row of its first child: the tree reads as a fan, not a staircase.
  assert.equal(layout.get('t2.0')!.row, layout.get('l0')!.row);
  assert.equal(layout.get('t1.2')!.row, layout.get('l2')!.row);
});

test("an actor's calls fill its lane, in rows no task takes", () => {
  const layout = new StableLayout();
  layout.place('a', []);
  const calls = Array.from({ length: 2 * LANE_CALLS + 1 }, (_, i) => `call${i}`);
  calls.forEach(id => layout.place(id, [], 'actor1'));
  layout.place('b', ['a']);
  layout.place('c', []);
  const [lane] = layout.lanes();
  assert.equal(lane.key, 'actor1');
  assert.equal(lane.calls, calls.length);
  assert.deepEqual(lane.rows, [1, 2, 3]);
  assert.deepEqual(layout.get('call0'), { col: 1, row: 1 });
  assert.deepEqual(layout.get(`call${LANE_CALLS}`), { col: 1, row: 2 });
  assert.deepEqual(layout.get(`call${2 * LANE_CALLS}`), { col: 1, row: 3 });
  // Tasks placed later skip the lane's rows.
  assert.deepEqual(layout.get('b'), { col: 1, row: 0 });
  assert.deepEqual(layout.get('c'), { col: 0, row: 4 });
  assert.equal(layout.rows, 5);
});

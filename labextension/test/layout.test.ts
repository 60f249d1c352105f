import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { StableLayout } from '../src/layout';

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

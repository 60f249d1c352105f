/**
 * A layered layout that never moves a node once placed, so the picture stays stable as the
 * graph grows.
 *
 * A node's column is one more than the largest column of its predecessors that are already
 * placed (0 without any); its row is the row of that predecessor, or the next free row of the
 * column if that one is taken (so a chain reads as one line and a tree as a fan). Both are
 * fixed at the node's first appearance: later edges do not move it. Nodes must be placed in an
 * order where predecessors come first (tasks in submission order do that; a predecessor not
 * placed yet is ignored).
 *
 * The calls of one actor go to that actor's lane instead: rows of their own, the lane's head
 * in column 0 and the calls in submission order in columns 1..LANE_CALLS, wrapping onto a new
 * row of the lane (the next free row of the graph: the one under the lane's last when nothing
 * else came in between). A lane's rows are reserved across all columns, so tasks never land
 * in them. Positions are grid cells, so hit testing is one map lookup.
 */

export interface Cell {
  col: number;
  row: number;
}

/** Calls per line of an actor's lane: wide enough to read as a row, narrow enough for a
 * panel beside a notebook. */
export const LANE_CALLS = 4;

export interface Lane {
  /** The actor (the key given to `place`). */
  key: string;
  /** Its rows, top to bottom; the head sits in column 0 of the first. */
  rows: number[];
  /** Calls placed in it. */
  calls: number;
}

export class StableLayout {
  private readonly cells = new Map<string, Cell>();
  private readonly byCell = new Map<string, string>();
  private readonly heights: number[] = [];
  private readonly reserved = new Set<number>();
  private readonly laneMap = new Map<string, Lane>();
  /** One past the lowest row used anywhere. */
  private bottom = 0;

  get size(): number {
    return this.cells.size;
  }

  /** Columns in use. */
  get columns(): number {
    return this.heights.length;
  }

  /** Rows in use (down to the lowest node or lane). */
  get rows(): number {
    return this.bottom;
  }

  /** Actor lanes in the order they appeared. */
  lanes(): Lane[] {
    return [...this.laneMap.values()];
  }

  get(id: string): Cell | undefined {
    return this.cells.get(id);
  }

  /** The node in a grid cell, if any. */
  at(col: number, row: number): string | undefined {
    return this.byCell.get(`${col}:${row}`);
  }

  /** Place `id` (once), in the lane of `lane` when given; returns its cell. */
  place(id: string, preds: Iterable<string>, lane?: string | null): Cell {
    const known = this.cells.get(id);
    if (known) {
      return known;
    }
    const cell = lane ? this.laneCell(lane) : this.dagCell(preds);
    this.cells.set(id, cell);
    this.byCell.set(`${cell.col}:${cell.row}`, id);
    this.bottom = Math.max(this.bottom, cell.row + 1);
    return cell;
  }

  private dagCell(preds: Iterable<string>): Cell {
    let col = 0;
    let row = 0;
    for (const pred of preds) {
      const cell = this.cells.get(pred);
      if (cell && (cell.col + 1 > col || (cell.col + 1 === col && cell.row < row))) {
        col = cell.col + 1;
        row = cell.row;
      }
    }
    this.widen(col);
    row = Math.max(row, this.heights[col]);
    while (this.reserved.has(row)) {
      row++;
    }
    this.heights[col] = row + 1;
    return { col, row };
  }

  private laneCell(key: string): Cell {
    let lane = this.laneMap.get(key);
    if (!lane) {
      lane = { key, rows: [], calls: 0 };
      this.laneMap.set(key, lane);
    }
    const line = Math.floor(lane.calls / LANE_CALLS);
    if (line === lane.rows.length) {
      // A new line starts below everything placed so far, so no node is ever in its way.
      const row = this.bottom;
      this.reserved.add(row);
      lane.rows.push(row);
      this.bottom = row + 1;
    }
    const col = 1 + (lane.calls % LANE_CALLS);
    lane.calls++;
    this.widen(col);
    return { col, row: lane.rows[line] };
  }

  private widen(col: number): void {
    while (this.heights.length <= col) {
      this.heights.push(0);
    }
  }
}

/**
 * A layered layout that never moves a node once placed, so the picture stays stable as the
 * graph grows.
 *
 * A node's column is one more than the largest column of its predecessors that are already
 * placed (0 without any); its row is the next free row of that column. Both are fixed at the
 * node's first appearance: later edges do not move it. Positions are grid cells, so hit testing
 * is one map lookup. Nodes must be placed in an order where predecessors come first (tasks in
 * submission order do that; a predecessor not placed yet is ignored).
 */

export interface Cell {
  col: number;
  row: number;
}

export class StableLayout {
  private readonly cells = new Map<string, Cell>();
  private readonly byCell = new Map<string, string>();
  private readonly heights: number[] = [];

  get size(): number {
    return this.cells.size;
  }

  /** Columns in use. */
  get columns(): number {
    return this.heights.length;
  }

  /** Rows of the tallest column. */
  get rows(): number {
    let max = 0;
    for (const h of this.heights) {
      max = Math.max(max, h);
    }
    return max;
  }

  get(id: string): Cell | undefined {
    return this.cells.get(id);
  }

  /** The node in a grid cell, if any. */
  at(col: number, row: number): string | undefined {
    return this.byCell.get(`${col}:${row}`);
  }

  /** Place `id` (once); returns its cell. */
  place(id: string, preds: Iterable<string>): Cell {
    const known = this.cells.get(id);
    if (known) {
      return known;
    }
    let col = 0;
    for (const pred of preds) {
      const cell = this.cells.get(pred);
      if (cell && cell.col + 1 > col) {
        col = cell.col + 1;
      }
    }
    while (this.heights.length <= col) {
      this.heights.push(0);
    }
    const cell = { col, row: this.heights[col]++ };
    this.cells.set(id, cell);
    this.byCell.set(`${col}:${cell.row}`, id);
    return cell;
  }
}

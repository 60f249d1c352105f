/**
 * Library runs (Tune searches, Train runs) as the panel keeps them: pure, no DOM.
 *
 * A snapshot's `runs` replace what is held; a delta's `runs` upsert each changed member's row
 * and append its news: curve points and marks numbered (their report number) above the last
 * held, so a delta applied twice changes nothing. A curve keeps at most MAX_POINTS points:
 * past that every other point goes (the kernel thins its own copy the same way).
 */

import { CurvePoint, Run, RunMark, RunMember } from './protocol';

export const MAX_POINTS = 200;
export const MAX_MARKS = 50;

export interface MemberState {
  row: RunMember;
  curves: Map<string, CurvePoint[]>;
  marks: RunMark[];
}

export interface RunState {
  id: string;
  library: string;
  name: string;
  metrics: string[];
  updated: number;
  members: Map<string, MemberState>;
}

function thin(points: CurvePoint[]): CurvePoint[] {
  return points.length > MAX_POINTS ? points.filter((_, i) => i % 2 === 0) : points;
}

function appendNews<T extends [number, ...unknown[]]>(held: T[], news: T[]): T[] {
  const last = held.length ? held[held.length - 1][0] : 0;
  const fresh = news.filter(item => item[0] > last);
  return fresh.length ? held.concat(fresh) : held;
}

export class RunsState {
  runs = new Map<string, RunState>();
  revision = 0;

  applySnapshot(runs: Record<string, Run> | undefined): void {
    this.runs = new Map();
    this.upsert(runs);
    this.revision++;
  }

  applyDelta(runs: Record<string, Run> | undefined, removed: string[] | undefined): void {
    let changed = this.upsert(runs);
    for (const id of removed ?? []) {
      changed = this.runs.delete(id) || changed;
    }
    if (changed) {
      this.revision++;
    }
  }

  /** Runs, the most recently updated first. */
  ordered(): RunState[] {
    return [...this.runs.values()].sort((a, b) => b.updated - a.updated);
  }

  private upsert(runs: Record<string, Run> | undefined): boolean {
    let changed = false;
    for (const id in runs ?? {}) {
      const run = runs![id];
      let state = this.runs.get(id);
      if (!state) {
        state = { ...run, members: new Map() };
        this.runs.set(id, state);
      }
      state.metrics = run.metrics;
      state.updated = Math.max(state.updated, run.updated);
      for (const memberId in run.members) {
        this.upsertMember(state, run.members[memberId]);
      }
      changed = true;
    }
    return changed;
  }

  private upsertMember(run: RunState, row: RunMember): void {
    let member = run.members.get(row.id);
    if (!member) {
      member = { row, curves: new Map(), marks: [] };
      run.members.set(row.id, member);
    }
    if (row.reports >= member.row.reports) {
      member.row = row;
    }
    for (const metric in row.curves) {
      const held = member.curves.get(metric) ?? [];
      member.curves.set(metric, thin(appendNews(held, row.curves[metric])));
    }
    member.marks = appendNews(member.marks, row.marks).slice(-MAX_MARKS);
  }
}

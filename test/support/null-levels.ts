/**
 * What a nested input really holds, so that a fixed test can assert its own claims
 * ("nulls at every level", "a child of length 0") instead of trusting a generator:
 * per level of the type tree (a path such as `deep[].a{value}[]`), how many of the
 * values a reader can reach there are null and how many are not. Only reachable slots
 * count: the rows of a (sliced) batch, the child ranges their list offsets select,
 * the union child slot each row's type id picks.
 */
import { Type, type Data, type RecordBatch } from 'apache-arrow';

export interface LevelCount {
  nulls: number;
  values: number;
  /** how the level can hold a null: 'validity' (its own bitmap), 'union' (never: a union has no validity), 'map-entries' / 'map-key' (never, by the spec) */
  kind: 'validity' | 'union' | 'map-entries' | 'map-key';
}

function walk(data: Data, rows: readonly number[], path: string, kind: LevelCount['kind'], out: Map<string, LevelCount>): void {
  const type = data.type;
  const level: LevelCount = out.get(path) ?? { nulls: 0, values: 0, kind: type.typeId === Type.Union ? 'union' : kind };
  out.set(path, level);
  if (type.typeId === Type.Union) {
    const union = type as unknown as { mode: number; typeIdToChildIndex: Record<number, number> };
    const typeIds = data.typeIds as Int8Array;
    const offsets = data.valueOffsets as Int32Array | undefined;
    level.values += rows.length;
    const perChild = data.children.map(() => [] as number[]);
    for (const i of rows) perChild[union.typeIdToChildIndex[typeIds[i]!]!]!.push(union.mode === 1 ? offsets![i]! : i);
    data.children.forEach((child, c) => walk(child, perChild[c]!, `${path}|${type.children[c]!.name}`, 'validity', out));
    return;
  }
  const valid = rows.filter((i) => data.getValid(i));
  level.nulls += rows.length - valid.length;
  level.values += valid.length;
  switch (type.typeId) {
    case Type.List:
    case Type.LargeList:
    case Type.Map: {
      const offsets = data.valueOffsets as Int32Array | BigInt64Array;
      const childRows: number[] = [];
      for (const i of valid) for (let e = Number(offsets[i]!); e < Number(offsets[i + 1]!); e++) childRows.push(e);
      const child = data.children[0]!;
      if (type.typeId !== Type.Map) {
        walk(child, childRows, `${path}[]`, 'validity', out);
        return;
      }
      const entries: LevelCount = out.get(`${path}{}`) ?? { nulls: 0, values: 0, kind: 'map-entries' };
      out.set(`${path}{}`, entries);
      const validEntries = childRows.filter((e) => child.getValid(e));
      entries.nulls += childRows.length - validEntries.length;
      entries.values += validEntries.length;
      walk(child.children[0]!, validEntries, `${path}{key}`, 'map-key', out);
      walk(child.children[1]!, validEntries, `${path}{value}`, 'validity', out);
      return;
    }
    case Type.FixedSizeList: {
      const size = (type as unknown as { listSize: number }).listSize;
      walk(data.children[0]!, valid.flatMap((i) => Array.from({ length: size }, (_, j) => i * size + j)), `${path}[fixed]`, 'validity', out);
      return;
    }
    case Type.Struct:
      data.children.forEach((child, c) => walk(child, valid, `${path}.${type.children[c]!.name}`, 'validity', out));
      return;
    default:
      return;
  }
}

/** Per level of every column, over all batches: reachable nulls and values. */
export function levelCounts(batches: readonly RecordBatch[]): Map<string, LevelCount> {
  const out = new Map<string, LevelCount>();
  for (const batch of batches) {
    batch.schema.fields.forEach((field, c) => {
      const column = batch.data.children[c]!;
      walk(column, Array.from({ length: column.length }, (_, i) => i), field.name, 'validity', out);
    });
  }
  return out;
}

/** The levels that could hold a null (their own validity) but reach none, or that no value reaches at all. */
export function levelsWithoutNulls(batches: readonly RecordBatch[], columns: readonly string[]): string[] {
  const out: string[] = [];
  for (const [path, level] of levelCounts(batches)) {
    if (!columns.some((c) => path === c || path.startsWith(`${c}[`) || path.startsWith(`${c}.`) || path.startsWith(`${c}{`) || path.startsWith(`${c}|`))) continue;
    if (level.values === 0) out.push(`${path}: no value reached`);
    else if (level.kind === 'validity' && level.nulls === 0) out.push(`${path}: no null`);
  }
  return out;
}

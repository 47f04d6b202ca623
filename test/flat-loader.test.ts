/**
 * loadFlatColumns makes the columns arrow-js's own loader would make. Each flat
 * type, with nulls and without a bitmap, is written by arrow-js as an IPC stream
 * and read back twice: by readIpcStream (every column flat, so the flat loader)
 * and by arrow-js. The columns must agree in type, length, null count, and the
 * kind and contents of every typed array.
 */
import { Dictionary, Field, Int32, List, Table, Utf8, Utf8View, tableFromIPC, tableToIPC, vectorFromArray, type Data } from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { BufferRegion, FieldNode } from 'apache-arrow/ipc/metadata/message';
import { VectorLoader } from 'apache-arrow/visitor/vectorloader';
import { flatKindsOf, loadFlatColumns } from '../src/format/flat-loader.js';
import { buildBatch, NO_BITMAP, TYPE_CASES, type ValiditySpec } from './support/columns.js';
import { Rng } from './support/random.js';
import { dataShapeOf, readBatches } from './support/ipc-batches.js';

const FLAT_CASES = TYPE_CASES.filter((c) => flatKindsOf([c.make()]) !== null);
const VALIDITIES: [string, ValiditySpec][] = [
  ['a third null', { bitmap: true, nullRate: 0.3 }],
  ['no bitmap', NO_BITMAP],
];

/** dataShapeOf, with the column's offset and number of children. */
const shapeWithChildrenOf = (data: Data) => ({ ...dataShapeOf(data), offset: data.offset, children: data.children.length });

test('the flat types are every supported type without children except the view types', () => {
  expect(FLAT_CASES.map((c) => c.name)).toEqual(TYPE_CASES.map((c) => c.name).filter((name) => !name.endsWith('View')));
  expect(flatKindsOf([new Utf8View()])).toBeNull();
  expect(flatKindsOf([new Int32(), new List(new Field('item', new Int32()))])).toBeNull();
});

describe.each(VALIDITIES)('columns with %s', (_, validity) => {
  test.each(FLAT_CASES.map((c) => [c.name, c] as const))('%s: the same Data as arrow-js makes', async (_name, typeCase) => {
    const batch = buildBatch([{ name: 'k', type: typeCase.make() }], 37, () => validity, new Rng(41));
    const bytes = tableToIPC(new Table([batch]), 'stream');
    const [ours] = await readBatches(bytes);
    const [theirs] = tableFromIPC(bytes).batches;
    expect(shapeWithChildrenOf(ours!.data.children[0]!)).toEqual(shapeWithChildrenOf(theirs!.data.children[0]!));
  });
});

test('a dictionary column gets its dictionary, as arrow-js gives it', async () => {
  const colours = vectorFromArray(['red', null, 'blue', 'red', 'green', null, 'blue'], new Dictionary(new Utf8(), new Int32()));
  const bytes = tableToIPC(new Table({ colour: colours }), 'stream');
  const [ours] = await readBatches(bytes);
  const [theirs] = tableFromIPC(bytes).batches;
  expect(shapeWithChildrenOf(ours!.data.children[0]!)).toEqual(shapeWithChildrenOf(theirs!.data.children[0]!));
  expect(ours!.getChild('colour')!.toArray()).toEqual(['red', null, 'blue', 'red', 'green', null, 'blue']);
});

test('a dictionary column whose dictionary batch never came gets an empty dictionary, as from arrow-js', () => {
  const type = new Dictionary(new Utf8(), new Int32(), 7);
  const node = { length: 2, nullCount: 2 };
  const buffers = [new Uint8Array(8), new Uint8Array(8)];
  const [ours] = loadFlatColumns([type], flatKindsOf([type])!, [node], buffers, new Map());
  const theirs = new VectorLoader(new Uint8Array(16), [new FieldNode(2, 2)], [new BufferRegion(0, 8), new BufferRegion(8, 8)], new Map()).visit(type);
  expect(ours!.dictionary!.length).toBe(0);
  expect(shapeWithChildrenOf(ours!)).toEqual(shapeWithChildrenOf(theirs));
  expect(theirs.dictionary!.length).toBe(0);
});

test('too few field nodes or buffers for the columns is an error, not a column of undefined buffers', () => {
  const types = [new Int32(), new Utf8()];
  const kinds = flatKindsOf(types)!;
  const node = { length: 1, nullCount: 0 };
  const bytes = new Uint8Array(8);
  expect(() => loadFlatColumns(types, kinds, [node], [bytes, bytes, bytes, bytes, bytes], new Map())).toThrow('1 field nodes for 2 columns');
  expect(() => loadFlatColumns(types, kinds, [node, node], [bytes, bytes, bytes, bytes], new Map())).toThrow('4 buffers, its columns need more');
});

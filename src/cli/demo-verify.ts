import type { RecordBatch, Schema } from 'apache-arrow';
import { describeSchema as describe, plural } from './context.js';
import { hashColumnInto, pmod, SPARK_HASH_SEED } from '../writer/murmur3.js';

/** Seeds of the two row fingerprints (any fixed values other than the partitioning seed). */
const FINGERPRINT_SEEDS = [7, 0x5eed];

/**
 * Checks a hash shuffle against its input without holding either in memory:
 * - as many rows come out as went in;
 * - every partition holds as many rows as the writer reports;
 * - every row comes out of the partition its key hashes to (Spark Murmur3, seed 42, pmod);
 * - the multiset of rows is the same: for two seeds, the wrapping sum over all rows of a
 *   Murmur3 hash over every column of the row must match (order does not matter, any
 *   changed, lost or duplicated value changes it).
 */
export class ShuffleVerifier {
  private readonly input = { rows: 0, prints: FINGERPRINT_SEEDS.map(() => 0) };
  private readonly output = { rows: 0, prints: FINGERPRINT_SEEDS.map(() => 0) };
  private misplaced = 0;
  private firstMisplaced = '';
  private schemaProblem = '';
  private hashes = new Int32Array(0);
  private readonly partitionRows: number[];

  private readonly expectedSchema: string;

  constructor(schema: Schema, private readonly keyColumn: string, private readonly numPartitions: number) {
    this.partitionRows = new Array<number>(numPartitions).fill(0);
    this.expectedSchema = describe(schema);
  }

  addInput(batch: RecordBatch): void {
    this.input.rows += batch.numRows;
    this.fingerprint(batch, this.input.prints);
  }

  /** A batch of another schema is a problem, and set aside: its columns cannot be checked as the schema's. */
  addOutput(partition: number, batch: RecordBatch): void {
    const schema = describe(batch.schema);
    if (schema !== this.expectedSchema) {
      this.schemaProblem ||= `partition ${partition} has schema ${schema}, expected ${this.expectedSchema}`;
      return;
    }
    this.output.rows += batch.numRows;
    this.partitionRows[partition]! += batch.numRows;
    this.fingerprint(batch, this.output.prints);
    const keys = this.hashesFor(batch.numRows, SPARK_HASH_SEED);
    const keyIndex = batch.schema.fields.findIndex((f) => f.name === this.keyColumn);
    hashColumnInto(batch.data.children[keyIndex]!, keys, this.keyColumn);
    for (let i = 0; i < batch.numRows; i++) {
      const expected = pmod(keys[i]!, this.numPartitions);
      if (expected !== partition) {
        if (this.misplaced === 0) this.firstMisplaced = `a row with key hash ${keys[i]} is in partition ${partition}, expected ${expected}`;
        this.misplaced++;
      }
    }
  }

  /** What is wrong; empty when the shuffle is verified. `partitionRows`: what the writer says it wrote. */
  problems(partitionRows: readonly number[]): string[] {
    const problems: string[] = [];
    // (a report of fewer partitions left the others unchecked)
    if (partitionRows.length !== this.partitionRows.length) {
      problems.push(`the writer reports ${plural(partitionRows.length, 'partition', 'partitions')}, the shuffle has ${this.partitionRows.length}`);
    } else {
      const wrong = partitionRows.findIndex((rows, p) => rows !== this.partitionRows[p]);
      if (wrong >= 0) problems.push(`partition ${wrong}: the writer reports ${partitionRows[wrong]} rows, ${this.partitionRows[wrong]} were read back`);
    }
    if (this.schemaProblem) problems.push(this.schemaProblem);
    if (this.output.rows !== this.input.rows) problems.push(`${this.output.rows} rows read back, ${this.input.rows} written`);
    if (this.misplaced > 0) problems.push(`${this.misplaced} rows in the wrong partition (${this.firstMisplaced})`);
    if (this.output.prints.some((p, i) => p !== this.input.prints[i])) problems.push('the rows read back differ from the rows written (fingerprint mismatch)');
    return problems;
  }

  private fingerprint(batch: RecordBatch, prints: number[]): void {
    FINGERPRINT_SEEDS.forEach((seed, s) => {
      const hashes = this.hashesFor(batch.numRows, seed);
      batch.schema.fields.forEach((field, c) => hashColumnInto(batch.data.children[c]!, hashes, field.name));
      let sum = prints[s]!;
      for (let i = 0; i < batch.numRows; i++) sum = (sum + hashes[i]!) | 0;
      prints[s] = sum;
    });
  }

  private hashesFor(rows: number, seed: number): Int32Array {
    if (this.hashes.length < rows) this.hashes = new Int32Array(rows);
    return this.hashes.subarray(0, rows).fill(seed);
  }
}

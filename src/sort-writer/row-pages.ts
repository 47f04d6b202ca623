import type { MemoryReservation } from '../memory/memory-pool.js';
import { MAX_PAGES } from './packed-pointer.js';

/**
 * The pages a sort writer appends its rows to (Spark's Tungsten pages in
 * ShuffleExternalSorter, Gluten's sort-writer pages): rows go one after the
 * other into the current page; when it is full the next page is opened. A
 * page's number (its index in the page table) and a row's offset in it make
 * up the row's packed pointer.
 *
 * Pages are pooled: after the rows have been written out (`reset`), the
 * standard-size pages are kept as spares and handed out again before any new
 * one is allocated (touching fresh memory costs about 3 ms per MiB on these
 * machines; reused pages are warm). A row larger than a page gets a page of
 * its own, dropped at the next reset.
 *
 * Memory: every page is reserved in `reservation` before it is taken from
 * the pool's recycler, and given back to it and released when dropped;
 * `reservedBytes` is what the pages hold.
 */
export class RowPages {
  /** pages in use, by page number */
  private readonly table: Uint8Array[] = [];
  private readonly views: DataView[] = [];
  private readonly wordViews: Int32Array[] = [];
  /** standard pages not in use */
  private readonly spares: Uint8Array[] = [];
  private position = 0;
  reservedBytes = 0;

  constructor(readonly pageBytes: number, private readonly reservation: MemoryReservation) {}

  /** Pages in use. */
  get pageCount(): number {
    return this.table.length;
  }

  get spareCount(): number {
    return this.spares.length;
  }

  /** The current page's number; -1 before the first page. */
  get current(): number {
    return this.table.length - 1;
  }

  /** Where the next row goes in the current page. */
  get offset(): number {
    return this.position;
  }

  /** Free bytes in the current page (0 before the first page). */
  get remaining(): number {
    const page = this.table[this.table.length - 1];
    return page === undefined ? 0 : page.byteLength - this.position;
  }

  page(number: number): Uint8Array {
    return this.table[number]!;
  }

  view(number: number): DataView {
    return this.views[number]!;
  }

  /** The page as 32-bit words (rows start at multiples of 4). */
  words(number: number): Int32Array {
    return this.wordViews[number]!;
  }

  /** Moves the current page's write position past `bytes` just written. */
  advance(bytes: number): void {
    this.position += bytes;
  }

  /**
   * Opens a new current page with room for `bytes` (a multiple of 4; a spare, or a new page if
   * the pool grants it at once). 'full' means the page table is full,
   * 'no-memory' that the pool refused: the caller writes its rows out (then
   * `reset` brings spares) or waits for memory with `openWaiting`.
   */
  tryOpen(bytes: number): 'ok' | 'full' | 'no-memory' {
    if (this.table.length >= MAX_PAGES) return 'full';
    const size = this.sizeFor(bytes);
    if (size === this.pageBytes && this.spares.length > 0) {
      this.push(this.spares.pop()!);
      return 'ok';
    }
    if (!this.reservation.tryGrow(size)) return 'no-memory';
    this.reservedBytes += size;
    this.push(this.reservation.recycler.take(size));
    return 'ok';
  }

  /** Opens a new page for `bytes`, waiting for the pool (which may ask other consumers to spill); MemoryLimitError if it cannot. */
  async openWaiting(bytes: number): Promise<void> {
    const size = this.sizeFor(bytes);
    await this.reservation.grow(size);
    this.reservedBytes += size;
    this.push(this.reservation.recycler.take(size));
  }

  /** Forgets every row: standard pages become spares, pages of single large rows are dropped; returns the bytes released. */
  reset(): number {
    let dropped = 0;
    for (const page of this.table) {
      if (page.byteLength === this.pageBytes) this.spares.push(page);
      else {
        this.reservation.recycler.give(page);
        dropped += page.byteLength;
      }
    }
    this.table.length = 0;
    this.views.length = 0;
    this.wordViews.length = 0;
    this.position = 0;
    this.release(dropped);
    return dropped;
  }

  /** Drops every spare page; returns the bytes released. */
  releaseSpares(): number {
    const bytes = this.spares.length * this.pageBytes;
    for (const page of this.spares) this.reservation.recycler.give(page);
    this.spares.length = 0;
    this.release(bytes);
    return bytes;
  }

  /** Drops every page, in use or spare; returns the bytes released. */
  releaseAll(): number {
    const bytes = this.reservedBytes;
    for (const page of [...this.table, ...this.spares]) this.reservation.recycler.give(page);
    this.table.length = 0;
    this.views.length = 0;
    this.wordViews.length = 0;
    this.spares.length = 0;
    this.position = 0;
    this.release(bytes);
    return bytes;
  }

  private sizeFor(bytes: number): number {
    return bytes <= this.pageBytes ? this.pageBytes : bytes;
  }

  private push(page: Uint8Array): void {
    this.table.push(page);
    this.views.push(new DataView(page.buffer, page.byteOffset, page.byteLength));
    this.wordViews.push(new Int32Array(page.buffer, page.byteOffset, page.byteLength >>> 2));
    this.position = 0;
  }

  private release(bytes: number): void {
    if (bytes === 0) return;
    this.reservedBytes -= bytes;
    this.reservation.shrink(bytes);
  }
}

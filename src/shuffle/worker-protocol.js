/** Batches sent but not yet pulled by the worker's transform: bounds the memory in flight between threads. */
export const TRANSFER_WINDOW = 2;

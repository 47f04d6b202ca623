// Used only when columnar-shuffle runs from its TypeScript sources (its own tests, tsx):
// Node 20 worker threads do not inherit a parent's --import loader, so the worker
// registers tsx itself before loading the .ts entry. The built package (dist/)
// starts dist/shuffle/map-task-worker.js directly and never loads this file.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);

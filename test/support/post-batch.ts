import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import type { PreparedTransfer, TransferableBatch } from '../../src/shuffle/batch-transfer.js';

/** Posts a prepared batch through a real MessageChannel, as MapTaskPool posts it to a worker, and returns what arrives. */
export function post(prepared: PreparedTransfer): TransferableBatch {
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(prepared.batch, prepared.transfer);
  const message = receiveMessageOnPort(port2)!.message as TransferableBatch;
  port1.close();
  return message;
}

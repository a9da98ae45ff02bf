import type { Readable, Writable } from 'node:stream';

/**
 * Most bytes handed to the multipart parser in one turn of the event loop. busboy's boundary
 * search (streamsearch, in JS) runs synchronously inside `write()`, and a loopback or fast client
 * delivers a whole photo between two turns: libuv reads up to 32 × 64 KiB from one socket per poll
 * and Node emits each read as a `data` event at once, so `body.pipe(parser)` parsed a 1.6 MB
 * upload (the 24 MP smoke photo) in one block of 10-14 ms of a loaded box's main thread, and a
 * body handed over as one buffer (a framework that buffers it) in one block of its whole size.
 * 64 KiB is about 0.1-0.5 ms of parsing on that box.
 */
export const PARSE_SLICE_BYTES = 64 * 1024;

/** Bytes waiting for the parser above which the body is paused (TCP backpressure to the client). */
const QUEUE_HIGH_BYTES = 4 * PARSE_SLICE_BYTES;

export interface SlicedFeed {
  /** Stop feeding: listeners are removed, the body is left paused, queued bytes are dropped. */
  stop(): void;
}

/**
 * Feeds `body` into `parser` like `body.pipe(parser)`, but at most `sliceBytes` per macrotask:
 * chunks are queued as they arrive and written in slices, one slice per `setImmediate`, so the
 * host's other sockets and timers get a turn between them. Honours the parser's backpressure
 * (`write()` false → wait for `drain`) and pauses the body while the queue is long. `onBytes` sees
 * every chunk as it arrives (before parsing), for a byte count that stops an oversized body early.
 * As with `pipe`, an error of the body is not forwarded: the caller's signal ends the read.
 */
export function feedInSlices(
  body: Readable,
  parser: Writable,
  onBytes: (chunk: Buffer) => void,
  sliceBytes = PARSE_SLICE_BYTES,
): SlicedFeed {
  const queue: Buffer[] = [];
  let queued = 0;
  let ended = false;
  let stopped = false;
  let scheduled = false;
  let waitingForDrain = false;
  let pausedHere = false;

  const onData = (data: Buffer | string) => {
    const chunk = typeof data === 'string' ? Buffer.from(data) : data;
    onBytes(chunk);
    if (stopped || chunk.length === 0) return;
    queue.push(chunk);
    queued += chunk.length;
    if (queued > QUEUE_HIGH_BYTES && !pausedHere) {
      pausedHere = true;
      body.pause();
    }
    schedule();
  };
  const onEnd = () => {
    ended = true;
    schedule();
  };
  const onDrain = () => {
    waitingForDrain = false;
    schedule();
  };

  function schedule(): void {
    if (scheduled || stopped || waitingForDrain) return;
    scheduled = true;
    setImmediate(feedOneSlice);
  }

  function feedOneSlice(): void {
    scheduled = false;
    let budget = sliceBytes;
    // A write can end the read (a limit's error stops the feed from inside the parser's events).
    while (!stopped && !waitingForDrain && budget > 0 && queue.length > 0) {
      const head = queue[0]!;
      const piece = head.length > budget ? head.subarray(0, budget) : head;
      if (piece === head) queue.shift();
      else queue[0] = head.subarray(budget);
      queued -= piece.length;
      budget -= piece.length;
      if (!parser.write(piece)) {
        waitingForDrain = true;
        parser.once('drain', onDrain);
      }
    }
    if (stopped) return;
    if (pausedHere && queued <= QUEUE_HIGH_BYTES) {
      pausedHere = false;
      body.resume();
    }
    if (queue.length > 0) schedule();
    else if (ended) {
      stop();
      parser.end();
    }
  }

  function stop(): void {
    if (stopped) return;
    stopped = true;
    body.off('data', onData);
    body.off('end', onEnd);
    parser.off('drain', onDrain);
    queue.length = 0;
    queued = 0;
  }

  body.on('data', onData);
  body.on('end', onEnd);
  return {
    stop() {
      if (stopped) return;
      stop();
      body.pause();
    },
  };
}

/**
 * The exec output stream: without a TTY the engines multiplex stdout and stderr into frames with an 8-byte header
 * (stream id, 3 zero bytes, big-endian length). Output is kept up to a limit per stream, tail first, so a chatty
 * command cannot exhaust evolve's memory while the end of its output (where errors are) survives.
 */

/** Default bytes kept per stream. */
export const OUTPUT_LIMIT = 16 * 1024 * 1024;

/** Keeps the last `limit` bytes written to it. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly limit = OUTPUT_LIMIT) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - this.chunks[0].length >= this.limit) {
      this.size -= this.chunks.shift()!.length;
      this.truncated = true;
    }
  }

  text(): string {
    let all = Buffer.concat(this.chunks);
    if (all.length > this.limit) {
      all = all.subarray(all.length - this.limit);
      this.truncated = true;
    }
    return all.toString("utf8");
  }
}

/** Splits the multiplexed byte stream into frames and hands each payload to its stream. */
export class Demuxer {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly sink: (stream: 1 | 2, payload: Buffer) => void) {}

  write(chunk: Buffer): void {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (this.pending.length >= 8) {
      const kind = this.pending[0];
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + size) break;
      const payload = this.pending.subarray(8, 8 + size);
      this.pending = this.pending.subarray(8 + size);
      // 0 (stdin echo) never occurs without a TTY; anything not stderr counts as stdout.
      this.sink(kind === 2 ? 2 : 1, payload);
    }
  }
}

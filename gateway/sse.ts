/**
 * Server-sent events on the gateway's hot path: an incremental parser (events are read only to find usage) and the
 * stream wrapper that forwards an upstream body to the client as the bytes arrive, metering it on the way.
 */
import { mayCarryUsage, StreamUsage, type WireApi } from "./usage.ts";

/** Splits SSE text, fed in arbitrary pieces, into events. Per the SSE spec a blank line ends an event. */
export class SseParser {
  private buf = "";
  /** The last piece ended in CR: a LF opening the next piece belongs to that line break. */
  private cr = false;

  /**
   * `skip`, when given, is asked about an event whose first line names it; an event it skips is dropped before its
   * data lines are split and joined (most of a stream is text deltas nobody meters).
   */
  constructor(
    private readonly onEvent: (event: string | undefined, data: string, raw: string) => void,
    private readonly skip?: (event: string) => boolean,
  ) {}

  /** Feed decoded text; complete events are dispatched, a trailing partial event waits for more. */
  push(text: string): void {
    // Normalising CR LF only when present keeps the common (LF-only) path to one indexOf per event.
    if (this.cr && text.charCodeAt(0) === 10) text = text.slice(1);
    this.cr = text.endsWith("\r");
    let buf = this.buf + (text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text);
    let start = 0;
    for (;;) {
      const end = buf.indexOf("\n\n", start);
      if (end < 0) break;
      this.dispatch(buf.slice(start, end));
      start = end + 2;
    }
    this.buf = start === 0 ? buf : buf.slice(start);
  }

  /** The stream ended: an event that was not closed by a blank line is still an event. */
  end(): void {
    const rest = this.buf;
    this.buf = "";
    if (rest.trim()) this.dispatch(rest.replace(/\n+$/, ""));
  }

  private dispatch(block: string): void {
    if (this.skip && block.startsWith("event:")) {
      const nl = block.indexOf("\n");
      const name = block.slice(block.charCodeAt(6) === 32 ? 7 : 6, nl < 0 ? block.length : nl);
      // per the SSE spec a later event line would rename the event, so only a sole one decides
      if (this.skip(name) && (nl < 0 || !block.includes("\nevent:", nl))) return;
    }
    let event: string | undefined;
    let data: string | undefined;
    let at = 0;
    while (at <= block.length) {
      let nl = block.indexOf("\n", at);
      if (nl < 0) nl = block.length;
      if (block.startsWith("data:", at)) {
        const v = block.slice(block.charCodeAt(at + 5) === 32 ? at + 6 : at + 5, nl);
        data = data === undefined ? v : data + "\n" + v;
      } else if (block.startsWith("event:", at)) {
        event = block.slice(block.charCodeAt(at + 6) === 32 ? at + 7 : at + 6, nl);
      }
      at = nl + 1;
    }
    this.onEvent(event, data ?? "", block);
  }
}

/** How a metered stream ended. */
export interface StreamEnd {
  usage: StreamUsage;
  /** Set when the upstream failed mid-stream or the client went away before the end. */
  error?: string;
}

/**
 * Wraps an upstream SSE body: bytes go to the client as they come (no buffering beyond the current event), and each
 * event that may carry usage is parsed on the side. With `dropUsageChunk` (OpenAI chat when the client did not ask
 * for `include_usage`) the extra usage-only chunk is withheld, so the stream is re-emitted event by event.
 * `onEnd` runs exactly once: at the end, on an upstream error, or when the client cancels; a stream whose final
 * usage had arrived ends without an error whichever way it closes, since the call was whole and is billed so.
 */
export function meteredStream(
  upstream: ReadableStream<Uint8Array>,
  api: WireApi,
  dropUsageChunk: boolean,
  onEnd: (end: StreamEnd) => void,
): ReadableStream<Uint8Array> {
  const usage = new StreamUsage(api);
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const reader = upstream.getReader();
  let out: string[] | undefined;
  // Named events are judged by name alone (Messages, Responses); chat and Gemini streams name none, and a stream
  // that is re-emitted event by event needs every event's text, so neither gets a skip.
  const skip = api === "chat" || api === "gemini" || dropUsageChunk ? undefined : (event: string) => !mayCarryUsage(api, event, "");
  const parser = new SseParser((event, data, raw) => {
    let drop = false;
    if (mayCarryUsage(api, event, data)) {
      try {
        const parsed = JSON.parse(data);
        usage.add(event, parsed);
        // The usage-only chunk has no choices (OpenAI sends [], some servers null or nothing).
        if (dropUsageChunk && parsed?.usage && (!Array.isArray(parsed.choices) || parsed.choices.length === 0)) drop = true;
      } catch {
        // not JSON (e.g. "[DONE]"): nothing to meter
      }
    }
    if (out && !drop) out.push(raw + "\n\n");
  }, skip);
  let ended = false;
  const finish = (error?: string) => {
    if (ended) return;
    ended = true;
    onEnd({ usage, error });
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          if (dropUsageChunk) {
            out = [];
            parser.end();
            if (out.length) ctl.enqueue(encoder.encode(out.join("")));
          } else {
            parser.end();
          }
          finish(usage.final ? undefined : usage.error ?? "stream ended without usage");
          ctl.close();
          return;
        }
        if (dropUsageChunk) {
          out = [];
          parser.push(decoder.decode(value, { stream: true }));
          if (out.length) ctl.enqueue(encoder.encode(out.join("")));
        } else {
          ctl.enqueue(value);
          parser.push(decoder.decode(value, { stream: true }));
        }
      } catch (err) {
        finish(usage.final ? undefined : `upstream stream failed: ${(err as Error)?.message ?? err}`);
        ctl.error(err);
      }
    },
    cancel(reason) {
      // Codex hangs up as soon as response.completed is in: the call is whole once its final usage arrived
      finish(usage.final ? undefined : "client closed the stream");
      return reader.cancel(reason);
    },
  });
}

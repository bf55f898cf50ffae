/**
 * OTLP bytes for a list of spans, in either of OTLP/HTTP's encodings: `http/protobuf` (an ExportTraceServiceRequest
 * message; what Phoenix requires) and `http/json` (its JSON mapping: ids as hex, 64-bit integers as decimal strings,
 * enums as integers).
 *
 * Why the OpenTelemetry project's own serializers (@opentelemetry/otlp-transformer) and not protobuf written by
 * hand: the wire format of a message this size is easy to get almost right (packed fields, fixed64 times, the
 * bytes of ids) and a near miss is a trace a backend silently drops; the library is the one every OpenTelemetry JS
 * exporter ships, kept in step with opentelemetry-proto, pure JavaScript (bundles into the Bun binary, runs under
 * Deno), and needs no .proto files at run time. It takes SDK `ReadableSpan`s; {@link toReadable} is the whole
 * adapter. The tests decode its output with protobufjs and the official .proto files, independently of it.
 */
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import type { OtelSpan } from "./spans.ts";

/** OTLP/HTTP's two encodings, as OTEL_EXPORTER_OTLP_PROTOCOL names them. */
export const OTLP_PROTOCOLS = ["http/protobuf", "http/json"] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** The Content-Type each encoding is sent with. */
export const CONTENT_TYPE: Record<OtlpProtocol, string> = { "http/protobuf": "application/x-protobuf", "http/json": "application/json" };

type ReadableSpan = Parameters<typeof ProtobufTraceSerializer.serializeRequest>[0][number];

/** The resource every exported span belongs to: evolve itself (the trial and job ride on the spans). */
const RESOURCE = { attributes: { "service.name": "evolve", "telemetry.sdk.language": "nodejs" }, schemaUrl: undefined } as unknown as ReadableSpan["resource"];
/** The instrumentation scope: one object, so the serializer groups every span under one scope. */
const SCOPE = { name: "evolve", version: "1" };

function hr(msEpoch: number): [number, number] {
  const s = Math.floor(msEpoch / 1000);
  return [s, Math.round((msEpoch - s * 1000) * 1e6)];
}

// OTLP's SpanKind is the API's plus one (the API has no "unspecified"); the serializer adds the one back
function toReadable(s: OtelSpan): ReadableSpan {
  const start = hr(s.startMs);
  const end = hr(s.endMs);
  const durMs = s.endMs - s.startMs;
  return {
    name: s.name,
    kind: (s.kind - 1) as ReadableSpan["kind"],
    spanContext: () => ({ traceId: s.traceId, spanId: s.spanId, traceFlags: 1 }),
    parentSpanContext: s.parentSpanId ? { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: 1 } : undefined,
    startTime: start,
    endTime: end,
    status: s.status as ReadableSpan["status"],
    attributes: s.attributes,
    links: [],
    events: s.events.map((e) => ({ name: e.name, time: hr(e.timeMs), attributes: e.attributes })),
    duration: hr(durMs),
    ended: true,
    resource: RESOURCE,
    instrumentationScope: SCOPE,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

/**
 * OTLP/JSON spells a 64-bit integer as a decimal string (the protobuf JSON mapping); the serializer leaves integer
 * attribute values as JSON numbers, which most receivers take but the spec does not promise. Rewritten here.
 */
function int64AsString(v: unknown): void {
  if (Array.isArray(v)) for (const x of v) int64AsString(x);
  else if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o.intValue === "number") o.intValue = String(o.intValue);
    for (const x of Object.values(o)) if (x && typeof x === "object") int64AsString(x);
  }
}

/** One ExportTraceServiceRequest holding `spans`, encoded as `protocol` says. */
export function encodeSpans(spans: readonly OtelSpan[], protocol: OtlpProtocol): Uint8Array {
  const readable = spans.map(toReadable);
  if (protocol === "http/protobuf") return ProtobufTraceSerializer.serializeRequest(readable) ?? new Uint8Array();
  const json = JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(readable) ?? new Uint8Array())) as unknown;
  int64AsString(json);
  return new TextEncoder().encode(JSON.stringify(json));
}


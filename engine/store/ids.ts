/**
 * Sortable ids (ULID layout: 48-bit millisecond time + 80 random bits, Crockford base32, 26 characters).
 * Listings sort by id to get creation order for free, across processes, without a shared counter.
 */
import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const RANDOM_MAX = (1n << 80n) - 1n;

let lastTime = -1;
let lastRandom = 0n;

function encode(value: bigint, length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) {
    out = ALPHABET[Number(value & 31n)] + out;
    value >>= 5n;
  }
  return out;
}

/**
 * A new id, strictly greater than every id this process made before. Within one millisecond the random part is
 * incremented instead of redrawn, so ids made in a tight loop still sort in creation order.
 */
export function newId(now: number = Date.now()): string {
  let time = now;
  if (time <= lastTime) {
    time = lastTime;
    lastRandom = lastRandom === RANDOM_MAX ? 0n : lastRandom + 1n;
    if (lastRandom === 0n) time = ++lastTime;
  } else {
    lastRandom = BigInt("0x" + randomBytes(10).toString("hex")) >> 1n; // keep headroom for increments
  }
  lastTime = time;
  return encode(BigInt(time), 10) + encode(lastRandom, 16);
}

/** When an id from {@link newId} was made (milliseconds since the epoch), or undefined for a foreign string. */
export function idTime(id: string): number | undefined {
  if (!/^[0-9A-HJKMNP-TV-Z]{26}$/.test(id)) return undefined;
  let t = 0;
  for (const c of id.slice(0, 10)) t = t * 32 + ALPHABET.indexOf(c);
  return t;
}

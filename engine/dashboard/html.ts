/**
 * HTML for the dashboard: a tagged template that escapes every value it is given unless the value is markup this
 * module made, so a trace, a task name or an exception holding `<script>` reaches the page as text. One escaping rule
 * for every page, rather than remembering to escape at each call.
 */

/** Markup already escaped (made by {@link h} or {@link raw}): passed through as it is. */
export class Safe {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text as HTML text or an attribute value: the five characters that can end either are replaced. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

/** Markup from a trusted constant (the stylesheet, the client script): never call it on data. */
export function raw(s: string): Safe {
  return new Safe(s);
}

function part(v: unknown): string {
  if (v === null || v === undefined || v === false) return "";
  if (v instanceof Safe) return v.text;
  if (Array.isArray(v)) return v.map(part).join("");
  return esc(String(v));
}

/** The template tag: `h\`<td>${name}</td>\`` escapes `name`; arrays of markup are joined; null, undefined, false print nothing. */
export function h(strings: TemplateStringsArray, ...values: unknown[]): Safe {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += part(values[i]) + strings[i + 1]!;
  return new Safe(out);
}

/**
 * Portable packs: a dataset's task folders, the images its trials run and the vendored agents, in one file that
 * `unpack` verifies member by member before anything is used (air-gapped machines, README "Air-gapped machines").
 *
 * The room's public surface (issue 21 §5): what commands use, by name; the rest of the folder is private by convention.
 */
export { packRef, unpackFile } from "./pack.ts";

/**
 * The names `trial download --stream` serves (platform-trial-outputs.md), apart from artifacts.ts so the CLI's
 * parser can list them without loading the readers.
 */
export const ARTIFACT_STREAMS = ["trace-parsed", "trace-atif", "trace-stdout", "trace-stderr", "verifier", "agent-home"] as const;
export type ArtifactStream = (typeof ARTIFACT_STREAMS)[number];

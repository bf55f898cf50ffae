/**
 * `evolve serve`: the local API under /api/v1 (the CLI's --json documents, one route table that is also the OpenAPI
 * document), its tokens and its listeners (loopback TCP with a token, or this user's unix socket).
 *
 * The room's public surface (issue 21 §5): what commands use, by name; the rest of the folder is private by convention.
 */
export { startServe } from "./listen.ts";
export { createToken, listTokens, revokeToken } from "./tokens.ts";

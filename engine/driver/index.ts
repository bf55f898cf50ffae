/** The engine driver: open an Engine (podman or docker over its REST socket). */
export * from "./types.ts";
export { connectEngine } from "./open.ts";
export { RestEngine } from "./engine.ts";
export { which } from "./socket.ts";

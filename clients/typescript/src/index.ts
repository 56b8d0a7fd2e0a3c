export * from "./client.js";
export * from "./present.js";
export { SSEParser, frames, type Frame } from "./sse.js";
export type { components, paths } from "./schema.js";

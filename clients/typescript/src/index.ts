export * from "./client.js";
export * from "./present.js";
export { SSEParser, IdleTimeoutError, FrameTooLargeError, defaultMaxEventSize, frames, type Frame, type FramesOptions } from "./sse.js";
export type { components, paths } from "./schema.js";

// The package's public surface: the client, its error and options, and the contract's types.

export { EngramClient, type ClientOptions } from "./client.js";
export { EngramError, DEFAULT_RETRY, RETRIED_CODES, backoffMs, type CallOptions, type RetryPolicy } from "./call.js";
export * from "./generated.js";

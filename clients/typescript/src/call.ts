// What every call shares: its options, the error it throws, and when it is tried again.

/** Per-call options: an abort signal and the trace id to send (echoed in errors and logs). */
export interface CallOptions {
  signal?: AbortSignal;
  /** Sent as `X-Trace-Id`: letters, digits and `_.:-`, up to 64 characters. */
  traceId?: string;
  /** A W3C `traceparent` (your OpenTelemetry span's): with tracing on, Engram's spans join its trace. */
  traceparent?: string;
}

/** How often a refused call is tried again: 42903 (rate limited) and 50301 (dependency unavailable). */
export interface RetryPolicy {
  /** Tries in all, the first included; 1 turns retries off. */
  attempts: number;
  /** The first wait; each later one doubles, up to `maxDelayMs`, with jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseDelayMs: 200, maxDelayMs: 5_000 };

/** The envelope codes a call is tried again on: the server refused before doing any work. */
export const RETRIED_CODES: ReadonlySet<number> = new Set([42903, 50301]);

/** An envelope with a non-zero code (other than 20001 on recall, an empty result). */
export class EngramError extends Error {
  readonly code: number;
  readonly traceId: string;
  /** The HTTP status it came with; 0 when no answer arrived. */
  readonly status: number;

  constructor(code: number, message: string, traceId: string, status: number) {
    super(`${code} ${message}${traceId ? ` (trace ${traceId})` : ""}`);
    this.name = "EngramError";
    this.code = code;
    this.traceId = traceId;
    this.status = status;
  }
}

/** The wait before try number `attempt + 1` (attempt 0 is the first retry): full jitter on half. */
export function backoffMs(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return ceiling / 2 + (ceiling / 2) * random();
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// The client: sends each operation of the contract over fetch (Node 20+ and browsers).

import {
  type CallOptions,
  DEFAULT_RETRY,
  EngramError,
  RETRIED_CODES,
  type RetryPolicy,
  backoffMs,
  pause,
} from "./call.js";
import {
  type ChangeLogRequest,
  type ChangeView,
  ErrorCode,
  type ExportDownloadRequest,
  type HeldMemory,
  type MemoryView,
  OPERATION_PATHS,
  type OperationName,
  type OperationTypes,
  Operations,
  type QuarantineListRequest,
  type UserListRequest,
} from "./generated.js";

const PREFIX = "/memory/v1";

export interface ClientOptions {
  /** Where Engram listens, e.g. `http://127.0.0.1:8000`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <key>` when the service has API keys configured. */
  apiKey?: string;
  /** Per try; a try that takes longer is aborted (and not tried again). Default 10 s. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Another fetch (a proxy's, a test's); the global one by default. */
  fetch?: typeof fetch;
}

interface Envelope {
  code: number;
  msg: string;
  trace_id: string;
  data: unknown;
  /** False when something else answered (a proxy's error page): its 50301 is ours, not Engram's. */
  fromEngram: boolean;
}

/** Engram over HTTP: `await new EngramClient({ baseUrl }).recall({ user_id, query })`. */
export class EngramClient extends Operations {
  readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly retry: RetryPolicy;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    super();
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  protected async send<N extends OperationName>(
    name: N,
    request: OperationTypes[N]["request"],
    options?: CallOptions,
  ): Promise<OperationTypes[N]["response"]> {
    for (let attempt = 0; ; attempt++) {
      const response = await this.post(OPERATION_PATHS[name], request, options);
      const envelope = await readEnvelope(response);
      if (envelope.code === 0 || (envelope.code === ErrorCode.NO_RELEVANT_MEMORY && name === "recall")) {
        return envelope.data as OperationTypes[N]["response"];
      }
      // Engram refused before doing any work, or a proxy found no server (503): safe to send again.
      const refused = RETRIED_CODES.has(envelope.code) && (envelope.fromEngram || response.status === 503);
      if (!refused || attempt + 1 >= this.retry.attempts) {
        throw new EngramError(envelope.code, envelope.msg, envelope.trace_id, response.status);
      }
      await pause(backoffMs(this.retry, attempt), options?.signal);
    }
  }

  /** Every change of `request`'s user, newest first, following the pages' cursors. */
  iterChangeLog(request: ChangeLogRequest, options?: CallOptions): AsyncGenerator<ChangeView> {
    return follow(request, (r) => this.changeLog(r, options), (page) => page.changes);
  }

  /** Every memory `request` selects, a page at a time under the hood (an admin key). */
  iterUserList(request: UserListRequest, options?: CallOptions): AsyncGenerator<MemoryView> {
    return follow(request, (r) => this.userList(r, options), (page) => page.memories);
  }

  /** Every memory held for review, oldest first (an admin key). */
  iterQuarantine(request: QuarantineListRequest, options?: CallOptions): AsyncGenerator<HeldMemory> {
    return follow(request, (r) => this.quarantineList(r, options), (page) => page.memories);
  }

  /** The lines of a finished export (JSON Lines, as `userImport` takes them back), streamed. */
  async *exportLines(request: ExportDownloadRequest, options?: CallOptions): AsyncGenerator<string> {
    const response = await this.post(`${PREFIX}/user/export/download`, request, options);
    const type = response.headers.get("content-type") ?? "";
    if (response.status !== 200 || !type.includes("ndjson") || response.body === null) {
      const envelope = await readEnvelope(response);
      throw new EngramError(envelope.code, envelope.msg, envelope.trace_id, response.status);
    }
    const decoder = new TextDecoder();
    let rest = "";
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      rest += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const lines = rest.split("\n");
      rest = done ? "" : (lines.pop() ?? "");
      for (const line of lines) {
        if (line.trim()) yield line;
      }
      if (done) return;
    }
  }

  /** The service's health document (`GET /healthz`), with no key needed. */
  async health(options?: CallOptions): Promise<Record<string, string>> {
    const response = await this.request(`/healthz`, { method: "GET" }, options);
    if (!response.ok) {
      throw new EngramError(ErrorCode.DEPENDENCY_UNAVAILABLE, `health answered HTTP ${response.status}`, "", response.status);
    }
    return (await response.json()) as Record<string, string>;
  }

  private post(path: string, body: unknown, options?: CallOptions): Promise<Response> {
    return this.request(path, { method: "POST", body: JSON.stringify(body) }, options);
  }

  private async request(path: string, init: RequestInit, options?: CallOptions): Promise<Response> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    if (options?.traceId) headers["x-trace-id"] = options.traceId;
    if (options?.traceparent) headers.traceparent = options.traceparent;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = options?.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    try {
      return await this.fetchImpl(`${this.baseUrl}${path}`, { ...init, headers, signal });
    } catch (error) {
      if (options?.signal?.aborted) throw error; // the caller's own abort: theirs to handle
      // No answer: the request may or may not have been applied, so it is not tried again.
      const reason = timeout.aborted ? `no answer within ${this.timeoutMs} ms` : `no answer: ${String(error)}`;
      throw new EngramError(ErrorCode.DEPENDENCY_UNAVAILABLE, reason, options?.traceId ?? "", 0);
    }
  }
}

/** The items of every page from `request`'s cursor (or the first page) to the last. */
async function* follow<R extends { cursor?: string | null }, P extends { next_cursor: string | null }, T>(
  request: R,
  fetchPage: (request: R) => Promise<P>,
  items: (page: P) => T[],
): AsyncGenerator<T> {
  let cursor = request.cursor ?? null;
  do {
    const page = await fetchPage({ ...request, cursor });
    yield* items(page);
    cursor = page.next_cursor;
  } while (cursor !== null);
}

async function readEnvelope(response: Response): Promise<Envelope> {
  const text = await response.text();
  try {
    const payload = JSON.parse(text) as Partial<Envelope>;
    if (typeof payload.code === "number") {
      const { code, msg = "", trace_id = "", data = null } = payload;
      return { code, msg, trace_id, data, fromEngram: true };
    }
  } catch {
    // not JSON: a proxy's page, say; reported below
  }
  const traceId = response.headers.get("x-trace-id") ?? "";
  const msg = `not an Engram answer (HTTP ${response.status})`;
  return { code: ErrorCode.DEPENDENCY_UNAVAILABLE, msg, trace_id: traceId, data: null, fromEngram: false };
}

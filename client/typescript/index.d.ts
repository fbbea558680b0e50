// Types of the wasmsched package (index.js). The records are the HTTP
// API's (host/api/openapi.json); the common fields are typed here.

export interface Options {
  /** The server, e.g. http://127.0.0.1:8080 (default: WASMSCHED_URL). */
  url?: string;
  /** A token (default: WASMSCHED_TOKEN): read or admin for a client, worker for a worker. */
  token?: string;
  /** The namespace (default: WASMSCHED_NAMESPACE, else "default"). */
  namespace?: string;
  /** A request's timeout (default 30000). */
  timeoutMs?: number;
}

export class WasmschedError extends Error {
  /** The HTTP status; 0 when the server could not be reached. */
  status: number;
  /** The API's error code (invalid, unauthorized, forbidden, not_found, conflict, ...; "unreachable"). */
  code: string;
  /** The server's message. */
  detail: string;
}

export interface Run {
  id: string;
  group: string;
  seq: number;
  state: "WAITING" | "LAUNCHED" | "RUNNING" | "STOPPING" | "SUCCEEDED" | "FAILED" | "STOPPED" | "DISCARDED";
  payload: string;
  attempt: number;
  max_attempts: number;
  result: string;
  output: string;
  exit_code: number | null;
  reason: string;
  labels: Record<string, string>;
  [field: string]: unknown;
}

export interface SubmitOptions {
  id?: string;
  slots?: number;
  priority?: number;
  duration_ms?: number;
  labels?: Record<string, string>;
  require?: Record<string, string>;
  /** "key=value[:weight]" */
  prefer?: string[];
  same_worker?: boolean;
  /** RFC 3339 */
  not_before?: string;
  timeout_ms?: number;
  max_attempts?: number;
  retry_backoff_ms?: number;
  retry_cap_ms?: number;
  idempotencyKey?: string;
  /** A W3C traceparent (the caller's span): the run's spans join its trace. */
  traceparent?: string;
}

export interface Page {
  runs: Run[];
  next_cursor: string;
  more: boolean;
}

export class Client {
  constructor(options?: Options);
  readonly url: string;
  readonly namespace: string;
  submit(group: string, payload?: string, options?: SubmitOptions): Promise<Run>;
  get(id: string): Promise<Run>;
  list(filter?: { group?: string; state?: string; labels?: Record<string, string>; limit?: number; cursor?: string }): Promise<Page>;
  stop(id: string, reason?: string): Promise<Run>;
  watch(filter?: { group?: string; run?: string; signal?: AbortSignal }): AsyncGenerator<Run>;
}

/** What a handler gets of the run it executes. */
export interface Assignment {
  id: string;
  /** The assignment's token: one execution per token. */
  token: string;
  group: string;
  payload: string;
  attempt: number;
  maxAttempts: number;
  timeoutMs: number;
  deadline: Date | null;
  durationMs: number;
  /** The W3C traceparent of the attempt's execution span ("" = none): the parent of the handler's spans. */
  traceparent: string;
  namespace: string;
  /** Report how far the attempt is (fraction 0 to 1, or null; a short message): the latest is sent at most once a second. */
  progress(fraction: number | null, message?: string): void;
  /** Set to keep what the attempt printed on the run. */
  output: string;
  exitCode: number | null;
}

export type Handler = (run: Assignment, signal: AbortSignal) => unknown | Promise<unknown>;

export interface WorkerOptions extends Options {
  /** Runs at once (default 1). */
  slots?: number;
  /** Goes into the worker's identity (default "node"). */
  name?: string;
  labels?: Record<string, string>;
  /** Groups it serves (default: its handlers' groups, or every group with handleDefault). */
  groups?: string[];
  heartbeatTtlMs?: number;
  drainTimeoutMs?: number;
  logger?: (level: string, message: string) => void;
  /** A file that gets "RUN TOKEN ATTEMPT" per execution start (default: WASMSCHED_JOURNAL). */
  journal?: string;
}

export class Worker {
  constructor(options?: WorkerOptions);
  readonly id: string | null;
  /** fn handles runs of group: its value is the run's result, a throw fails the attempt, signal aborts when the run must end. */
  handle(group: string, fn: Handler): this;
  handleDefault(fn: Handler): this;
  /** Register and serve until SIGTERM/SIGINT or stop(), then drain. */
  run(options?: { signals?: boolean }): Promise<void>;
  /** Start the drain. */
  stop(): void;
}

export function readEvents(resp: Response): AsyncGenerator<{ event: string; data: string }>;

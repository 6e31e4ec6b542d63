// A server of the tasks extension (io.modelcontextprotocol/tasks) built with the TypeScript SDK v2
// (@modelcontextprotocol/server) and only its public API, for the interop test ts_sdk_tasks_test.go.
// The SDK has no tasks of its own at 2026-07-28; this script keeps the tasks, in memory, and
// serves them through what the SDK lets a server author do:
//   - registerTool handlers that answer a tools/call with a CreateTaskResult (resultType "task":
//     the SDK passes a tools/call result's resultType through untouched) when the request's own
//     client capabilities declare the extension, and run the work in the background. The SDK
//     adds "content": [] to it, as to any tool result without content;
//   - setRequestHandler with explicit schemas for tasks/get and tasks/cancel (names the SDK
//     reserves for the extension on 2026-07-28 and dispatches once registered so) and for
//     tasks/update (a method no revision of the SDK knows, hence a custom method, whose
//     inputResponses the SDK hands over in ctx.mcpReq.inputResponses);
//   - capabilities.extensions["io.modelcontextprotocol/tasks"], which server/discover carries.
// The SDK's HTTP entry checks that Mcp-Name mirrors params.taskId on tasks/get, tasks/update and
// tasks/cancel before any of this runs.
//
//   node ts-sdk-tasks-server.mjs <install dir> <port>
//
// It serves Streamable HTTP on 127.0.0.1 (port 0: the kernel chooses; "MCPINTEROP_LISTENING
// 127.0.0.1 <port>" on stderr says which). Under HTTP the SDK builds a server per request, so the
// tasks live in this module, not in a server.
//
// The tools, each made a task only when the call declares the extension:
//   echo_later {message}  completes, after a few polls, with "Echo: <message>"; answered at once
//                          when the call does not declare the extension.
//   greet {}               asks the client for a name (an elicitation in inputRequests), and
//                          completes with "Hello, <name>!" once tasks/update delivers it.
//   explode {}             fails with the JSON-RPC error -32603 "backend unavailable".
//   endless {}             works until tasks/cancel cancels it.
// and stats {taskId}, a plain tool, reports what the server saw of a task: the tasks/update
// requests it received and the answers to each input request.
import http from "node:http";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";

const [dir, portArg] = process.argv.slice(2);
if (!dir) {
  process.stderr.write("usage: ts-sdk-tasks-server.mjs <install dir> <port>\n");
  process.exit(2);
}
const from = (rel) => import(pathToFileURL(path.join(dir, "node_modules", rel)).href);
const { McpServer, ProtocolError, ProtocolErrorCode, MissingRequiredClientCapabilityError,
  CLIENT_CAPABILITIES_META_KEY, createMcpHandler } = await from("@modelcontextprotocol/server/dist/index.mjs");
const { z } = await from("zod/index.js");

const EXTENSION = "io.modelcontextprotocol/tasks";
// Short enough that the test's polls are quick; the client honours it.
const POLL_INTERVAL_MS = 20;
const TTL_MS = 60_000;

/** @type {Map<string, any>} task id → task */
const tasks = new Map();

// The request's own client capabilities: the SDK lifts the reserved _meta keys out of _meta into
// ctx.mcpReq.envelope before the handler runs.
function declaresExtension(ctx) {
  const caps = ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_META_KEY];
  return caps?.extensions?.[EXTENSION] !== undefined;
}

function requireExtension(ctx, method) {
  if (!declaresExtension(ctx)) {
    throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [EXTENSION]: {} } } },
      `${method} needs the ${EXTENSION} extension declared`);
  }
}

function newTask() {
  const now = new Date().toISOString();
  const task = {
    taskId: randomUUID(), status: "working", createdAt: now, lastUpdatedAt: now,
    ttlMs: TTL_MS, pollIntervalMs: POLL_INTERVAL_MS,
    gets: 0, updates: 0, answers: {}, dropped: [], inputRequests: undefined, waiting: undefined,
    result: undefined, error: undefined, statusMessage: undefined, cancelled: new AbortController(),
  };
  tasks.set(task.taskId, task);
  return task;
}

function settle(task, status, fields = {}) {
  if (["completed", "failed", "cancelled"].includes(task.status)) return;
  Object.assign(task, { status, inputRequests: undefined, ...fields });
  task.lastUpdatedAt = new Date().toISOString();
}

/** The CreateTaskResult of a task: the Task's fields at the top level. */
function created(task) {
  return {
    resultType: "task", taskId: task.taskId, status: task.status, createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt, ttlMs: task.ttlMs, pollIntervalMs: task.pollIntervalMs,
  };
}

/** The DetailedTask tasks/get answers with. */
function detailed(task) {
  const d = {
    taskId: task.taskId, status: task.status, createdAt: task.createdAt, lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: task.ttlMs, pollIntervalMs: task.pollIntervalMs,
  };
  if (task.statusMessage !== undefined) d.statusMessage = task.statusMessage;
  if (task.status === "input_required") d.inputRequests = task.inputRequests;
  if (task.status === "completed") d.result = task.result;
  if (task.status === "failed") d.error = task.error;
  return d;
}

/** Resolves after n more tasks/get of the task, or when it is cancelled. */
function polls(task, n) {
  const until = task.gets + n;
  return new Promise((resolve) => {
    const check = () => {
      if (task.gets >= until || task.cancelled.signal.aborted) resolve();
      else setTimeout(check, 5);
    };
    check();
  });
}

/** Asks the client, through inputRequests, and resolves with its answer to key. */
function ask(task, key, request) {
  return new Promise((resolve) => {
    task.waiting = { key, resolve };
    settle(task, "input_required", { inputRequests: { [key]: request } });
  });
}

const text = (t) => ({ content: [{ type: "text", text: t }] });

function taskOf(taskId) {
  const task = tasks.get(taskId);
  if (!task) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Failed to retrieve task: Task not found`);
  return task;
}

function buildServer() {
  const server = new McpServer({ name: "mcpclient-interop-ts-sdk-tasks", version: "1.0.0" }, {
    capabilities: { extensions: { [EXTENSION]: {} } },
  });

  // Runs work as a task when the call declares the extension, else answers with plain(): a
  // server MUST NOT answer a client that did not declare it with a task.
  const asTask = (ctx, work, plain) => {
    if (!declaresExtension(ctx)) return plain();
    const task = newTask();
    Promise.resolve().then(() => work(task)).then(
      (result) => settle(task, "completed", { result }),
      (err) => {
        if (task.cancelled.signal.aborted) return;
        settle(task, "failed", {
          statusMessage: `Tool execution failed: ${err.message}`,
          error: { code: err.code ?? ProtocolErrorCode.InternalError, message: err.message },
        });
      });
    return created(task);
  };
  // A tool that runs only as a task refuses a call that does not declare the extension. The
  // spec's answer is the JSON-RPC error -32021, but McpServer's tools/call turns anything a tool
  // handler throws (but -32042) into an isError result, so the refusal arrives as the tool's.
  const needsTask = () => {
    throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [EXTENSION]: {} } } },
      "Missing required client capability");
  };

  server.registerTool("echo_later", {
    description: "Echoes its message, in the background when it can.",
    inputSchema: z.object({ message: z.string() }),
  }, async ({ message }, ctx) => asTask(ctx, async (task) => {
    await polls(task, 2);
    return text(`Echo: ${message}`);
  }, () => text(`Echo: ${message}`)));

  server.registerTool("greet", {
    description: "Asks for a name, then greets.",
    inputSchema: z.object({}),
  }, async (_args, ctx) => asTask(ctx, async (task) => {
    await polls(task, 1);
    const answer = await ask(task, `name-${task.taskId.slice(0, 8)}`, {
      method: "elicitation/create",
      params: {
        mode: "form", message: "Who is there?",
        requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
      },
    });
    if (answer.action !== "accept") return { ...text(`No name (${answer.action})`), isError: true };
    return text(`Hello, ${answer.content.name}!`);
  }, needsTask));

  server.registerTool("explode", {
    description: "Fails with a JSON-RPC error.",
    inputSchema: z.object({}),
  }, async (_args, ctx) => asTask(ctx, async (task) => {
    await polls(task, 1);
    throw new ProtocolError(ProtocolErrorCode.InternalError, "backend unavailable");
  }, needsTask));

  server.registerTool("endless", {
    description: "Works until it is cancelled.",
    inputSchema: z.object({}),
  }, async (_args, ctx) => asTask(ctx, (task) => new Promise(() => {}), needsTask));

  server.registerTool("stats", {
    description: "What the server saw of a task.",
    inputSchema: z.object({ taskId: z.string() }),
  }, async ({ taskId }) => {
    const task = taskOf(taskId);
    const seen = { status: task.status, updates: task.updates, answers: task.answers, dropped: task.dropped };
    return { ...text(JSON.stringify(seen)), structuredContent: seen };
  });

  const taskParams = z.object({ taskId: z.string() }).passthrough();

  server.server.setRequestHandler("tasks/get", { params: taskParams }, async ({ taskId }, ctx) => {
    requireExtension(ctx, "tasks/get");
    const task = taskOf(taskId);
    task.gets++;
    return detailed(task);
  });

  // On 2026-07-28 the SDK lifts params.inputResponses off every client request, as the
  // multi-round-trip retry field, before the params reach a handler: the answers are in
  // ctx.mcpReq.inputResponses (bare results only; keys of wrapped {method, result} entries are in
  // ctx.mcpReq.droppedInputResponseKeys).
  server.server.setRequestHandler("tasks/update", { params: taskParams }, async ({ taskId }, ctx) => {
    requireExtension(ctx, "tasks/update");
    const task = taskOf(taskId);
    const inputResponses = ctx.mcpReq.inputResponses;
    if (inputResponses === undefined) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, "tasks/update needs inputResponses");
    }
    task.updates++;
    for (const key of ctx.mcpReq.droppedInputResponseKeys ?? []) task.dropped.push(key);
    for (const [key, response] of Object.entries(inputResponses)) {
      task.answers[key] = (task.answers[key] ?? 0) + 1;
      // Answers to keys not outstanding (never issued, or answered already) are ignored.
      if (task.waiting?.key === key) {
        const { resolve } = task.waiting;
        task.waiting = undefined;
        // The acknowledgement is eventually consistent: the task shows the request for one more
        // poll, which the client must not answer again.
        polls(task, 1).then(() => {
          settle(task, "working");
          resolve(response);
        });
      }
    }
    return {};
  });

  server.server.setRequestHandler("tasks/cancel", { params: taskParams }, async ({ taskId }, ctx) => {
    requireExtension(ctx, "tasks/cancel");
    const task = taskOf(taskId);
    task.cancelled.abort();
    settle(task, "cancelled", { statusMessage: "cancelled by the client" });
    return {};
  });

  return server;
}

const handler = createMcpHandler(() => buildServer(), {
  onerror: (err) => process.stderr.write(`onerror: ${err.message}\n`),
});
const server = http.createServer(async (req, res) => {
  // node:http to the handler's fetch face, as in ts-sdk-server.mjs.
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  try {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
      else if (v !== undefined) headers.set(k, v);
    }
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method, headers, signal: abort.signal,
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (err) {
    process.stderr.write(`http adapter: ${err.stack ?? err}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});
server.listen(Number(portArg ?? 0), "127.0.0.1", () => {
  process.stderr.write(`MCPINTEROP_LISTENING 127.0.0.1 ${server.address().port}\n`);
});
process.on("SIGTERM", () => {
  handler.close().finally(() => server.close(() => process.exit(0)));
  server.closeAllConnections();
});

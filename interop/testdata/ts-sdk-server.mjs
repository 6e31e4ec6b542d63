// A small server built with the TypeScript SDK v2 (@modelcontextprotocol/server), for the
// interop tests (ts_sdk_test.go). No build step: plain ESM.
//
//   node ts-sdk-server.mjs <install dir> stdio
//   node ts-sdk-server.mjs <install dir> http <port> [auto|json|sse]
//
// <install dir> is where ts-sdk.sh installed the SDK (it holds node_modules). The SDK is imported
// from there by path, because this file does not live next to that node_modules. In http mode
// the server listens on 127.0.0.1 only; port 0 lets the kernel choose, and the port it got is
// written to stderr as "MCPINTEROP_LISTENING 127.0.0.1 <port>".
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dir, mode, portArg, responseMode = "auto"] = process.argv.slice(2);
if (!dir || !["stdio", "http"].includes(mode)) {
  process.stderr.write("usage: ts-sdk-server.mjs <install dir> stdio | http <port> [auto|json|sse]\n");
  process.exit(2);
}
const from = (rel) => import(pathToFileURL(path.join(dir, "node_modules", rel)).href);
const { McpServer, ResourceTemplate, createMcpHandler } = await from("@modelcontextprotocol/server/dist/index.mjs");
const { z } = await from("zod/index.js");

// Counts the runs of the unsafe tool over the whole process: under HTTP the SDK builds a fresh
// server per request, so the count cannot live in one.
let increments = 0;

function buildServer() {
  const server = new McpServer({ name: "mcpclient-interop-ts-sdk", version: "1.0.0" },
    {
      // No cacheHints: at 2026-07-28 the SDK then stamps every listing ttlMs 0, stale at once,
      // and the client must list again before a resend that rests on add's idempotentHint.
      instructions: "A test server for the mcpclient interop tests.",
    });

  server.registerTool("echo", {
    description: "Echoes its message.",
    inputSchema: z.object({ message: z.string() }),
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async ({ message }) => ({ content: [{ type: "text", text: `Echo: ${message}` }] }));

  server.registerTool("add", {
    description: "Adds two numbers; safe to repeat.",
    inputSchema: z.object({ a: z.number(), b: z.number() }),
    outputSchema: z.object({ sum: z.number() }),
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  }, async ({ a, b }) => ({
    content: [{ type: "text", text: `${a} + ${b} = ${a + b}` }],
    structuredContent: { sum: a + b },
  }));

  server.registerTool("increment", {
    description: "Increments a counter: every run has an effect.",
    inputSchema: z.object({ by: z.number().int() }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  }, async ({ by }) => {
    increments += by;
    return { content: [{ type: "text", text: `counter=${increments}` }] };
  });

  server.registerTool("fail", {
    description: "Always fails inside the handler.",
    inputSchema: z.object({ reason: z.string() }),
  }, async ({ reason }) => {
    throw new Error(`failed on purpose: ${reason}`);
  });

  server.registerResource("readme", "interop://readme", { title: "Readme", mimeType: "text/plain" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: "This server exists for the interop tests." }] }));

  server.registerResource("greeting", new ResourceTemplate("interop://greeting/{name}", { list: undefined }),
    { mimeType: "text/plain" },
    async (uri, { name }) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: `Hello, ${name}!` }] }));

  server.registerPrompt("review", {
    description: "Asks for a review of some code.",
    argsSchema: z.object({ code: z.string() }),
  }, ({ code }) => ({
    messages: [{ role: "user", content: { type: "text", text: `Please review:\n${code}` } }],
  }));

  return server;
}

if (mode === "stdio") {
  const { serveStdio } = await from("@modelcontextprotocol/server/dist/stdio.mjs");
  serveStdio(() => buildServer(), { onerror: (err) => process.stderr.write(`onerror: ${err.stack ?? err}\n`) });
} else {
  const handler = createMcpHandler(() => buildServer(), {
    responseMode,
    onerror: (err) => process.stderr.write(`onerror: ${err.message}\n`),
  });
  const server = http.createServer(async (req, res) => {
    // node:http to the handler's fetch face: a web Request in, a web Response (maybe an event
    // stream) out, aborted when the client goes away.
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
}

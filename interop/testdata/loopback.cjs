// Preloaded into the everything server with `node --require`: every server it starts listens on
// 127.0.0.1 only (express's app.listen(PORT) would bind every interface), and the address it got
// is written to stderr as "MCPINTEROP_LISTENING <host> <port>", so that PORT=0 lets the kernel
// choose a free port without a race.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    args.shift();
    if (typeof args[0] === "string") args.shift(); // a host given: replaced
    args.unshift(Number(first), "127.0.0.1");
  } else if (first && typeof first === "object" && !("fd" in first) && !("_handle" in first) && !("path" in first)) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  this.once("listening", () => {
    const a = this.address();
    if (a && typeof a === "object") process.stderr.write(`MCPINTEROP_LISTENING ${a.address} ${a.port}\n`);
  });
  return listen.apply(this, args);
};

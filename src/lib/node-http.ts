import type * as Http from 'node:http'
import type * as Https from 'node:https'

// An ES module import of node:http makes Node 22 and later read every export to build the module's namespace,
// and node:http's lazy WebSocket, fetch and EventSource exports load undici with it: 30-70 ms of start-up for
// every command that talks to the API server or serves /metrics (bench:startup, docs/benchmarks.md). The
// CommonJS object process.getBuiltinModule returns leaves them unread. Types still come from `import type`.
export const nodeHttp: typeof Http = process.getBuiltinModule('node:http')
export const nodeHttps: typeof Https = process.getBuiltinModule('node:https')

// Preloaded into a benchmarked process (node --require): on exit, writes to $NFDCTL_BENCH_RSS_FILE, as one
// line of numbers, its peak RSS in bytes, the CPU time it used (user + system, in microseconds), and when (ms
// since the process started) it sent its first request, its first DELETE, and had its last answer, so a
// benchmark measures the real CLI process, and says where its time went, without external tools. The HTTP
// client's diagnostics channels are read, not patched: nothing in the process's own path changes.
const {subscribe} = require('node:diagnostics_channel')
const {writeFileSync} = require('node:fs')
const {performance} = require('node:perf_hooks')

let firstRequest = -1
let firstDelete = -1
let lastAnswer = -1
subscribe('http.client.request.start', ({request}) => {
  const now = performance.now()
  if (firstRequest < 0) firstRequest = now
  if (firstDelete < 0 && request.method === 'DELETE') firstDelete = now
})
subscribe('http.client.response.finish', () => {
  lastAnswer = performance.now()
})

process.on('exit', () => {
  const usage = process.resourceUsage()
  const times = [firstRequest, firstDelete, lastAnswer, performance.now()].map((ms) => ms.toFixed(1))
  if (process.env.NFDCTL_BENCH_RSS_FILE) writeFileSync(process.env.NFDCTL_BENCH_RSS_FILE, [usage.maxRSS * 1024, usage.userCPUTime + usage.systemCPUTime, ...times].join(' '))
})
